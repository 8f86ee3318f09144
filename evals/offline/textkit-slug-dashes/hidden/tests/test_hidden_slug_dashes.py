from textkit.slug import slugify


def test_a_run_of_spaces_is_one_dash():
    assert slugify("a   b") == "a-b"


def test_a_dash_between_spaces_is_one_dash():
    assert slugify("before - after") == "before-after"


def test_dashes_at_the_ends_are_dropped():
    assert slugify("--x--") == "x"


def test_tabs_and_newlines_count_as_spaces():
    assert slugify("one\t\ntwo") == "one-two"
