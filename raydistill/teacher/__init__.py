"""What is done with the teacher once a run's loop exists: fine-tuning it on gold labels (``fit.finetune``: the same
loop the students train with, reused by fingerprint, resumed by epoch; ``prepare_teacher`` for a sweep) and scoring it
as a sweep's yardstick (``reference``: its dev score, size and latency, the constant answer's floor).

What the stages below need of a teacher stays below, where they can import it: loading any encoder, its layout and
fingerprint (``models/encoder.py``: students are loaded through it too), the teacher-output cache the loop reads
(``train/teacher_cache.py``), and the labels of its head (``tasks/files.teacher_head``: read when the data is resolved,
before a config exists)."""
