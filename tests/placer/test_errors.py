"""`placer.errors.interrupted`: Ctrl-C however it reaches Python."""

from placer.errors import PlacerError, interrupted


def _raised(make):
    try:
        make()
    except BaseException as e:
        return e


def _wrapped_interrupt():
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as e:
        raise SystemError("returned a result with an exception set") from e


def test_a_keyboard_interrupt_is_one():
    assert interrupted(KeyboardInterrupt())


def test_an_error_caused_by_one_is_one():
    """numba hands a KeyboardInterrupt raised in compiled code back as the cause of a SystemError."""
    assert interrupted(_raised(_wrapped_interrupt))


def test_other_errors_are_not():
    assert not interrupted(PlacerError("bad input"))
    assert not interrupted(_raised(lambda: 1 / 0))
