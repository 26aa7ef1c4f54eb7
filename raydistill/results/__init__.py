"""What a sweep shows a person: its summary (table, Pareto plot, best run), the tables, and the teacher as the
yardstick."""
