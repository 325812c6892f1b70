from reader import read_rows


def mailing_list(path):
    """'name <email>' for each person of the export at ``path``."""
    people = []
    for row in read_rows(path):
        # Excel puts a byte-order mark before the first column's name.
        row = {key.lstrip("\ufeff"): value for key, value in row.items()}
        people.append(f"{row['name']} <{row['email']}>")
    return people


def team_sizes(path):
    """How many people each team of the export at ``path`` has."""
    sizes = {}
    for row in read_rows(path):
        sizes[row["team"]] = sizes.get(row["team"], 0) + 1
    return sizes
