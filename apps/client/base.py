"""What the sync and async clients share: their state and their methods. Each line of
``ClientBase``'s table makes one method of both clients from one builder of
``apps.client.calls``; a client only says how a call is sent (``_bind``) and how pages are
followed (``_bind_pages``)."""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    get_args,
    overload,
)

import httpx

from apps.client import calls
from apps.client.calls import Call
from apps.client.retry import API_CLIENT, RetryPolicy
from apps.client.wire import redacted
from worldmm.wire.schemas import WhoAmI

if TYPE_CHECKING:
    from apps.client.aio import AsyncWorldMMClient
    from apps.client.sync import WorldMMClient

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
DEFAULT_TIMEOUT_S = 300.0  # a question runs up to five rounds of model calls


class Paged(Protocol[T_co]):
    @property
    def items(self) -> Sequence[T_co]: ...

    @property
    def next_cursor(self) -> str | None: ...


class Endpoint(Generic[P, R]):
    """One method of both clients, made from a builder of ``calls``: ``mm.query(...)`` builds
    the call (the user's id first when ``needs_user``) and the client sends it. The bound
    method carries the builder's docstring and signature, less the user's id."""

    def __init__(self, build: Callable[..., Call[R]], *, needs_user: bool) -> None:
        self.build = build
        self.needs_user = needs_user
        self.name = build.__name__
        self.doc = build.__doc__
        built = inspect.signature(build, eval_str=True)
        params = list(built.parameters.values())[needs_user:]
        returns = get_args(built.return_annotation)[0]  # Call[M] -> M
        self.signature = inspect.Signature(params, return_annotation=returns)

    def call(self, user_id: str | None, *args: Any, **kwargs: Any) -> Call[R]:
        lead = (user_id,) if self.needs_user else ()
        return self.build(*lead, *args, **kwargs)

    @overload
    def __get__(self, client: None, _owner: type) -> Endpoint[P, R]: ...
    @overload
    def __get__(self, client: WorldMMClient, _owner: type) -> Callable[P, R]: ...
    @overload
    def __get__(self, client: AsyncWorldMMClient, _owner: type) -> Callable[P, Awaitable[R]]: ...
    def __get__(self, client: ClientBase | None, _owner: type) -> Any:
        if client is None:
            return self
        return _dressed(client._bind(self), client, self.name, self.doc, self.signature)


class Pages(Generic[P, T]):
    """Every item of a paged endpoint, page after page (from ``cursor`` when one is given):
    a generator in the sync client, an async one in the async client."""

    def __init__(self, endpoint: Endpoint[P, Paged[T]], doc: str) -> None:
        self.endpoint = endpoint
        self.doc = doc
        self.name = ""

    def __set_name__(self, _owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, client: None, _owner: type) -> Pages[P, T]: ...
    @overload
    def __get__(self, client: WorldMMClient, _owner: type) -> Callable[P, Iterator[T]]: ...
    @overload
    def __get__(
        self, client: AsyncWorldMMClient, _owner: type
    ) -> Callable[P, AsyncIterator[T]]: ...
    def __get__(self, client: ClientBase | None, _owner: type) -> Any:
        if client is None:
            return self
        signature = self.endpoint.signature.replace(return_annotation=inspect.Signature.empty)
        return _dressed(client._bind_pages(self), client, self.name, self.doc, signature)


def _dressed(
    method: Callable[..., Any],
    client: ClientBase,
    name: str,
    doc: str | None,
    sig: inspect.Signature,
) -> Any:
    """``method`` named, documented and signed like the call it sends, for help() and IDEs."""
    method.__name__ = name
    method.__qualname__ = f"{type(client).__name__}.{name}"
    method.__doc__ = doc
    method.__signature__ = sig  # type: ignore[attr-defined]
    return method


def user_call(build: Callable[Concatenate[str, P], Call[R]]) -> Endpoint[P, R]:
    return Endpoint(build, needs_user=True)


def service_call(build: Callable[P, Call[R]]) -> Endpoint[P, R]:
    return Endpoint(build, needs_user=False)


class ClientBase(ABC):
    """One user's memory over the query API. ``user_id`` may be left out: the first call that
    needs it asks the API whose key this is (``GET /v1/whoami``). A client says which httpx
    client it sends with and how it waits between tries (``sleep``, injectable in tests)."""

    _http_class: type[httpx.Client] | type[httpx.AsyncClient]
    _default_sleep: Callable[[float], Any]

    def __init__(
        self,
        api_url: str,
        key: str,
        user_id: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], Any] | None = None,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not key:
            raise ValueError("an API key is needed")
        self.api_url = api_url.rstrip("/")
        self._key = key
        self._user_id = user_id
        self.retry = retry or API_CLIENT
        self._sleep = sleep or type(self)._default_sleep
        # the key goes into this header and nowhere else
        headers = {"Authorization": f"Bearer {key}"}
        self._http: Any = self._http_class(
            transport=transport, base_url=self.api_url, headers=headers, timeout=timeout_s
        )

    def __repr__(self) -> str:
        key = redacted(self._key)
        return f"{type(self).__name__}({self.api_url!r}, key={key}, user={self._user_id!r})"

    def _learn_user(self, me: WhoAmI) -> str:
        if me.user_id is None:
            raise ValueError("the admin key acts for any user: pass user_id")
        self._user_id = me.user_id
        return me.user_id

    @abstractmethod
    def _bind(self, endpoint: Endpoint[P, R]) -> Callable[P, Any]:
        """A function that builds ``endpoint``'s call from its arguments and sends it."""

    @abstractmethod
    def _bind_pages(self, pages: Pages[P, T]) -> Callable[P, Any]:
        """A function that yields every item of ``pages``, following next_cursor."""

    # --- the calls: each line is one method of both clients ----------------------------------
    query = user_call(calls.query)
    search = user_call(calls.search)
    segments = user_call(calls.segments)
    iter_segments = Pages(segments, "Every matching segment, page after page.")
    segment = user_call(calls.segment)
    frames = user_call(calls.frames)
    frame = user_call(calls.frame)
    semantic = user_call(calls.semantic)
    remember = user_call(calls.remember)
    forget = user_call(calls.forget)
    usage = user_call(calls.usage)
    profile = user_call(calls.profile)
    update_profile = user_call(calls.update_profile)
    forget_recent = user_call(calls.forget_recent)
    pause = user_call(calls.pause)
    resume = user_call(calls.resume)
    export = user_call(calls.export)
    whoami = service_call(calls.whoami)
    health = service_call(calls.health)
    ready = service_call(calls.ready)
    create_user = service_call(calls.create_user)
    purge_user = service_call(calls.purge_user)
