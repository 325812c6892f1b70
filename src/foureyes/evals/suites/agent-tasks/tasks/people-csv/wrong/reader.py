import csv


def read_rows(path):
    """The rows of the CSV file at ``path``, as dicts keyed by its header."""
    with open(path, newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))
