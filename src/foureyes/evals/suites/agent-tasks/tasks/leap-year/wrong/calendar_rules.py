def is_leap(year):
    """Whether ``year`` is a leap year of the Gregorian calendar."""
    return year % 4 == 0 and year % 100 != 0
