"""What a sweep shows a person: its summary (table, Pareto plot, best run), the tables, and the winner against its
labels-only control (the teacher as the yardstick is ``raydistill.teacher.reference``)."""
