import abc
import warnings

import pytest

from torchrl._utils._deprecation import deprecated_alias, rename_kwargs, warn_once


class _Base(abc.ABC):
    @abc.abstractmethod
    def f(self): ...


class _Impl(_Base):
    def f(self):
        return 1


def test_alias_of_abc_subclass_checks_do_not_recurse():
    Old = deprecated_alias(_Impl, "OldImpl")
    with pytest.warns(DeprecationWarning, match="OldImpl is deprecated; use _Impl instead"):
        obj = Old()
    assert type(obj) is _Impl
    assert isinstance(obj, Old) and isinstance(_Impl(), Old) and isinstance(obj, _Base)
    assert issubclass(_Impl, Old) and not issubclass(int, Old) and not issubclass(int, _Base)

    class User(Old):  # subclassing the alias still works
        pass

    assert isinstance(User(), _Impl)


def test_warn_once_and_rename_kwargs():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_once("unique message 123")
        warn_once("unique message 123")
    assert len(caught) == 1
    kwargs = rename_kwargs("F", {"minimum": 1}, {"minimum": "low"})
    assert kwargs == {"low": 1}
    with pytest.raises(TypeError, match="got both 'minimum'"):
        rename_kwargs("F", {"minimum": 1, "low": 2}, {"minimum": "low"})
