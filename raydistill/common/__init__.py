"""Services every stage uses, importing nothing of the package above them: errors (one-line user errors), paths,
the Hugging Face hub check, progress lines, result folders (the folder rule)."""
