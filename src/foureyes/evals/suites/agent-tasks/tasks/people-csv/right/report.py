from reader import read_rows


def mailing_list(path):
    """'name <email>' for each person of the export at ``path``."""
    return [f"{row['name']} <{row['email']}>" for row in read_rows(path)]


def team_sizes(path):
    """How many people each team of the export at ``path`` has."""
    sizes = {}
    for row in read_rows(path):
        sizes[row["team"]] = sizes.get(row["team"], 0) + 1
    return sizes
