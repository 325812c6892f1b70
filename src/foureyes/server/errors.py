"""Every failure a client sees is an OpenAI-style JSON body.

::

    {"error": {"message": str, "type": str, "code": str | null, "param": str | null}}

Handlers and dependencies raise :class:`ApiError` with an :class:`ErrorCode`; the code
fixes the HTTP status and the error type, and its message is written in the caller's
language (``Accept-Language``: zh-Hans, zh-Hant or en). :func:`install_error_handlers`
turns FastAPI's validation errors, Starlette's HTTP errors, :class:`StoreError` (503: the
service delivers nothing it could not record; a :class:`StoreDataError`, text the store
refuses whatever its state, is 422 ``unstorable_text``) and any unexpected exception
into such bodies. Messages never echo the request's content. A text field that holds an
unpaired surrogate or a NUL (:mod:`foureyes.wire.text`) is 422 ``invalid_text``, or
``invalid_text_crisis`` with the crisis resources when the message still reads as one.
A request the wire layer refuses (:class:`~foureyes.wire.errors.InvalidRequest`: a rule
its schema cannot express) is 422 ``invalid_request`` naming the field.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException

from foureyes.core.errors import FoureyesError, StoreDataError, StoreError, UsageError
from foureyes.core.locale import Locale
from foureyes.core.validation import ValidationProblem, explain_errors
from foureyes.server._logging import log_event, server_logger
from foureyes.wire.errors import InvalidRequest
from foureyes.wire.text import INVALID_TEXT

__all__ = [
    "ApiError",
    "ErrorBody",
    "ErrorCode",
    "ErrorObject",
    "TextScreen",
    "error_response",
    "error_responses",
    "install_error_handlers",
    "locale_from_accept_language",
]

_MAX_DETAILS = 5

TextScreen = Callable[[Request, Sequence[str], Any], str | None]
"""``screen(request, refused_message_texts, parsed_body)``: crisis resources to attach, or
``None`` (see :func:`install_error_handlers`); called on every ``invalid_text`` refusal,
the refused message texts maybe none (another field's text was refused)."""


class ErrorCode(StrEnum):
    """The ``code`` of an error body; each fixes its HTTP status and error ``type``."""

    BAD_REQUEST = "bad_request"
    """400: the request cannot be read (``detail`` says why)."""
    INVALID_JSON = "invalid_json"
    """400: the body is not JSON (``detail``: the parser's reason and position)."""
    INVALID_ENCODING = "invalid_encoding"
    """400: a JSON body that is not UTF-8 text."""
    MISSING_API_KEY = "missing_api_key"
    """401: no ``Authorization: Bearer`` key was sent."""
    INVALID_API_KEY = "invalid_api_key"
    """401: the key is unknown or revoked."""
    NO_API_KEYS = "no_api_keys"
    """401: the service has no active key, so it refuses everything."""
    LOOPBACK_ONLY = "loopback_only"
    """401: no key exists yet; only callers on this machine are served."""
    INSUFFICIENT_SCOPE = "insufficient_scope"
    """403: the key lacks the scope the endpoint needs (``required``)."""
    NOT_FOUND = "not_found"
    """404: no such endpoint or resource."""
    METHOD_NOT_ALLOWED = "method_not_allowed"
    """405: the endpoint exists but not for this ``method``."""
    EVAL_RUN_EMPTY = "eval_run_empty"
    """409: the eval ``run`` exists but has no results to report yet."""
    REQUEST_TOO_LARGE = "request_too_large"
    """413: the body is larger than ``limit`` bytes."""
    REQUEST_TIMEOUT = "request_timeout"
    """408: the body did not arrive within ``timeout_s`` seconds; the connection is closed."""
    INVALID_REQUEST = "invalid_request"
    """422: the body is JSON but not a valid request (``detail``; ``param`` names the field)."""
    INVALID_TEXT = "invalid_text"
    """422: a text field holds an unpaired surrogate or a NUL (``param`` names the first)."""
    INVALID_TEXT_CRISIS = "invalid_text_crisis"
    """422: as ``invalid_text``, for a message whose readable part L0 escalates: the crisis
    resources are in the error's ``resources``."""
    UNSTORABLE_TEXT = "unstorable_text"
    """422: the store refused the request's text as data (a NUL or an unpaired surrogate)."""
    RATE_LIMITED = "rate_limit_exceeded"
    """429: the key's rate limit is reached; retry after ``retry_after`` seconds."""
    INTERNAL_ERROR = "internal_error"
    """500: the service failed on this request."""
    STORE_UNAVAILABLE = "store_unavailable"
    """503: the store cannot be reached, so nothing was done or delivered."""

    @property
    def status(self) -> int:
        """The HTTP status answered with this code."""
        return _STATUS[self]

    @property
    def type(self) -> str:
        """The error ``type`` of the body (the class of failure)."""
        return _TYPES[self.status]

    def message(self, locale: Locale, **values: object) -> str:
        """The message in ``locale`` with ``values`` filled in.

        Raises:
            UsageError: ``values`` do not name exactly the placeholders of the message.
        """
        template = _MESSAGES[self][locale]
        wanted = {name for _, name, _, _ in string.Formatter().parse(template) if name}
        if wanted != set(values):
            raise UsageError(f"error {self.value} takes {sorted(wanted)}, got {sorted(values)}")
        return template.format(**{k: str(v).rstrip(".") for k, v in values.items()})


_STATUS = {
    ErrorCode.BAD_REQUEST: 400,
    ErrorCode.INVALID_JSON: 400,
    ErrorCode.INVALID_ENCODING: 400,
    ErrorCode.MISSING_API_KEY: 401,
    ErrorCode.INVALID_API_KEY: 401,
    ErrorCode.NO_API_KEYS: 401,
    ErrorCode.LOOPBACK_ONLY: 401,
    ErrorCode.INSUFFICIENT_SCOPE: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.EVAL_RUN_EMPTY: 409,
    ErrorCode.REQUEST_TOO_LARGE: 413,
    ErrorCode.REQUEST_TIMEOUT: 408,
    ErrorCode.INVALID_REQUEST: 422,
    ErrorCode.INVALID_TEXT: 422,
    ErrorCode.INVALID_TEXT_CRISIS: 422,
    ErrorCode.UNSTORABLE_TEXT: 422,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.INTERNAL_ERROR: 500,
    ErrorCode.STORE_UNAVAILABLE: 503,
}
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "service_unavailable_error",
}
_EN, _HANS, _HANT = Locale.EN, Locale.ZH_HANS, Locale.ZH_HANT
_MESSAGES: dict[ErrorCode, dict[Locale, str]] = {
    ErrorCode.BAD_REQUEST: {
        _EN: "Bad request: {detail}.",
        _HANS: "请求有误：{detail}。",
        _HANT: "請求有誤：{detail}。",
    },
    ErrorCode.INVALID_JSON: {
        _EN: "The request body is not valid JSON: {detail}.",
        _HANS: "请求体不是有效的 JSON：{detail}。",
        _HANT: "請求內容不是有效的 JSON：{detail}。",
    },
    ErrorCode.INVALID_ENCODING: {
        _EN: "The request body is not valid UTF-8 JSON text.",
        _HANS: "请求体不是有效的 UTF-8 JSON 文本。",
        _HANT: "請求內容不是有效的 UTF-8 JSON 文字。",
    },
    ErrorCode.MISSING_API_KEY: {
        _EN: "No API key was sent. Send one in the header 'Authorization: Bearer <key>'.",
        _HANS: "请求未携带 API 密钥。请在请求头中发送 'Authorization: Bearer <密钥>'。",
        _HANT: "請求未附帶 API 金鑰。請在請求標頭中傳送 'Authorization: Bearer <金鑰>'。",
    },
    ErrorCode.INVALID_API_KEY: {
        _EN: "The API key is not valid (unknown or revoked).",
        _HANS: "API 密钥无效（不存在或已撤销）。",
        _HANT: "API 金鑰無效（不存在或已撤銷）。",
    },
    ErrorCode.NO_API_KEYS: {
        _EN: "This service has no active API key, so it refuses every request. "
        "Create one with 'foureyes keys create'.",
        _HANS: "本服务没有可用的 API 密钥，因此拒绝所有请求。"
        "请用 'foureyes keys create' 创建一个。",
        _HANT: "本服務沒有可用的 API 金鑰，因此拒絕所有請求。"
        "請用 'foureyes keys create' 建立一個。",
    },
    ErrorCode.LOOPBACK_ONLY: {
        _EN: "This service has no API key yet, so it serves only requests from its own "
        "machine. Create a key with 'foureyes keys create'.",
        _HANS: "本服务尚无 API 密钥，因此只接受来自本机的请求。"
        "请用 'foureyes keys create' 创建密钥。",
        _HANT: "本服務尚無 API 金鑰，因此只接受來自本機的請求。"
        "請用 'foureyes keys create' 建立金鑰。",
    },
    ErrorCode.INSUFFICIENT_SCOPE: {
        _EN: "This endpoint needs a key with the '{required}' scope.",
        _HANS: "此接口需要具有 '{required}' 权限的密钥。",
        _HANT: "此端點需要具有 '{required}' 權限的金鑰。",
    },
    ErrorCode.NOT_FOUND: {
        _EN: "The requested endpoint or resource does not exist.",
        _HANS: "请求的接口或资源不存在。",
        _HANT: "請求的端點或資源不存在。",
    },
    ErrorCode.METHOD_NOT_ALLOWED: {
        _EN: "This endpoint does not accept the {method} method.",
        _HANS: "此接口不接受 {method} 方法。",
        _HANT: "此端點不接受 {method} 方法。",
    },
    ErrorCode.EVAL_RUN_EMPTY: {
        _EN: "Eval run '{run}' has no results yet, so there is nothing to report.",
        _HANS: "评测运行 '{run}' 尚无结果，暂无报告可看。",
        _HANT: "評測執行 '{run}' 尚無結果，暫無報告可看。",
    },
    ErrorCode.REQUEST_TOO_LARGE: {
        _EN: "The request body is larger than the limit of {limit} bytes.",
        _HANS: "请求体超过了 {limit} 字节的上限。",
        _HANT: "請求內容超過了 {limit} 位元組的上限。",
    },
    ErrorCode.REQUEST_TIMEOUT: {
        _EN: "The request body did not arrive within {timeout_s} s; the connection is closed.",
        _HANS: "请求体未在 {timeout_s} 秒内传完，连接已关闭。",
        _HANT: "請求內容未在 {timeout_s} 秒內傳完，連線已關閉。",
    },
    ErrorCode.INVALID_REQUEST: {
        _EN: "The request is not valid: {detail}.",
        _HANS: "请求无效：{detail}。",
        _HANT: "請求無效：{detail}。",
    },
    ErrorCode.INVALID_TEXT: {
        _EN: "The request holds text that is not valid Unicode, so nothing was done: "
        "{detail}. Send the text again without it; retrying as it is cannot succeed.",
        _HANS: "请求中有不是有效 Unicode 的文本，因此未作任何处理：{detail}。"
        "请去掉这些字符后重新发送；原样重试不会成功。",
        _HANT: "請求中有不是有效 Unicode 的文字，因此未作任何處理：{detail}。"
        "請去掉這些字元後重新傳送；原樣重試不會成功。",
    },
    ErrorCode.INVALID_TEXT_CRISIS: {
        _EN: "The request holds text that is not valid Unicode, so no reply was made: "
        "{detail}. The readable part of the message suggests its writer may be in danger, "
        "so crisis resources are attached in 'resources': please show them to the user.",
        _HANS: "请求中有不是有效 Unicode 的文本，因此没有生成回复：{detail}。"
        "消息中可读的部分显示写信人可能处于危险之中，"
        "危机求助资源附在 'resources' 中：请展示给用户。",
        _HANT: "請求中有不是有效 Unicode 的文字，因此沒有產生回覆：{detail}。"
        "訊息中可讀的部分顯示寫信人可能身處危險，"
        "危機求助資源附在 'resources' 中：請展示給使用者。",
    },
    ErrorCode.UNSTORABLE_TEXT: {
        _EN: "The store cannot keep text of this request (a NUL character or an unpaired "
        "surrogate), so nothing was done or delivered; the same request would be refused "
        "again.",
        _HANS: "存储无法保存此请求中的文本（含 NUL 字符或未配对的代理项），"
        "因此未执行也未返回任何内容；同样的请求会再次被拒绝。",
        _HANT: "儲存無法保存此請求中的文字（含 NUL 字元或未配對的代理項），"
        "因此未執行也未傳回任何內容；同樣的請求會再次被拒絕。",
    },
    ErrorCode.RATE_LIMITED: {
        _EN: "Rate limit reached for this key; retry in {retry_after} s.",
        _HANS: "此密钥已达到速率上限，请在 {retry_after} 秒后重试。",
        _HANT: "此金鑰已達速率上限，請在 {retry_after} 秒後重試。",
    },
    ErrorCode.INTERNAL_ERROR: {
        _EN: "The service failed while handling this request.",
        _HANS: "服务处理此请求时出错。",
        _HANT: "服務處理此請求時出錯。",
    },
    ErrorCode.STORE_UNAVAILABLE: {
        _EN: "The service's store is unavailable, so nothing was done or delivered; retry later.",
        _HANS: "服务的存储暂时不可用，因此未执行也未返回任何内容；请稍后重试。",
        _HANT: "服務的儲存暫時無法使用，因此未執行也未傳回任何內容；請稍後重試。",
    },
}


class ErrorObject(BaseModel):
    """The ``error`` object of every error body."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    message: str
    """What went wrong, in the caller's language; never the request's content."""
    type: str
    """The class of failure (``invalid_request_error``, ``authentication_error``, ...)."""
    code: str | None
    """An :class:`ErrorCode` value (``model_not_found`` for an unknown model)."""
    param: str | None
    """The request field at fault, dotted (``messages.0.content``), if any."""
    resources: str | None = None
    """Only with ``invalid_text_crisis``: the crisis resources, rendered by code."""


class ErrorBody(BaseModel):
    """The body of every error answer (OpenAI's shape)."""

    error: ErrorObject
    """The error."""


_OPENAPI_NOTES = {
    404: "; on the gateway also `model_not_found`",
    422: (
        "; `invalid_text` for a text holding a NUL (every text field's `pattern` excludes "
        "it) or an unpaired surrogate (not Unicode text, so no schema string holds one)"
    ),
    503: "; beyond `server.max_connections`, uvicorn's own plain-text 503",
}


_DETAIL_WORDS: dict[str, dict[Locale, str]] = {
    "json": {_HANS: "JSON 格式错误", _HANT: "JSON 格式錯誤"},
    "position": {_HANS: "（位置 {position}）", _HANT: "（位置 {position}）"},
    "more": {_EN: "and {count} more", _HANS: "另有 {count} 处", _HANT: "另有 {count} 處"},
    "invalid": {_EN: "invalid request", _HANS: "请求无效", _HANT: "請求無效"},
    "body": {_EN: "body", _HANS: "请求体", _HANT: "請求內容"},
    "mean": {_HANS: "（是否应为 {name}？）", _HANT: "（是否應為 {name}？）"},
}
"""Words of a validation error's detail (the English ones beside the problems' own)."""

_CTX_KEYS = ("min_length", "max_length", "ge", "gt", "le", "lt")
"""The context values of a pydantic error that a Chinese message may name."""

_VALIDATION: dict[str, dict[Locale, str]] = {
    "missing": {_HANS: "缺少此字段", _HANT: "缺少此欄位"},
    "extra_forbidden": {_HANS: "不接受此字段", _HANT: "不接受此欄位"},
    "string_type": {_HANS: "应为字符串", _HANT: "應為字串"},
    "string_too_short": {
        _HANS: "至少应有 {min_length} 个字符",
        _HANT: "至少應有 {min_length} 個字元",
    },
    "string_too_long": {
        _HANS: "至多可有 {max_length} 个字符",
        _HANT: "至多可有 {max_length} 個字元",
    },
    "string_pattern_mismatch": {_HANS: "格式不符", _HANT: "格式不符"},
    "too_short": {_HANS: "至少应有 {min_length} 项", _HANT: "至少應有 {min_length} 項"},
    "too_long": {_HANS: "至多可有 {max_length} 项", _HANT: "至多可有 {max_length} 項"},
    "int_type": {_HANS: "应为整数", _HANT: "應為整數"},
    "int_parsing": {_HANS: "应为整数", _HANT: "應為整數"},
    "int_from_float": {_HANS: "应为整数", _HANT: "應為整數"},
    "float_type": {_HANS: "应为数字", _HANT: "應為數字"},
    "float_parsing": {_HANS: "应为数字", _HANT: "應為數字"},
    "bool_type": {_HANS: "应为布尔值", _HANT: "應為布林值"},
    "bool_parsing": {_HANS: "应为布尔值", _HANT: "應為布林值"},
    "list_type": {_HANS: "应为数组", _HANT: "應為陣列"},
    "tuple_type": {_HANS: "应为数组", _HANT: "應為陣列"},
    "dict_type": {_HANS: "应为对象", _HANT: "應為物件"},
    "model_type": {_HANS: "应为对象", _HANT: "應為物件"},
    "model_attributes_type": {_HANS: "应为对象", _HANT: "應為物件"},
    # Not the expected values: pydantic lists them joined by an English "or".
    "literal_error": {_HANS: "不是允许的取值", _HANT: "不是允許的取值"},
    "enum": {_HANS: "不是允许的取值", _HANT: "不是允許的取值"},
    "greater_than": {_HANS: "应大于 {gt}", _HANT: "應大於 {gt}"},
    "greater_than_equal": {_HANS: "应不小于 {ge}", _HANT: "應不小於 {ge}"},
    "less_than": {_HANS: "应小于 {lt}", _HANT: "應小於 {lt}"},
    "less_than_equal": {_HANS: "应不大于 {le}", _HANT: "應不大於 {le}"},
    "datetime_type": {_HANS: "应为时间", _HANT: "應為時間"},
    "datetime_parsing": {_HANS: "应为时间", _HANT: "應為時間"},
    INVALID_TEXT: {_HANS: "含有无效的 Unicode 文本", _HANT: "含有無效的 Unicode 文字"},
    "value_error": {_HANS: "值无效", _HANT: "值無效"},
    # A value of none of a union's forms (a message's content neither text nor parts).
    "union": {_HANS: "类型不符", _HANT: "類型不符"},
}
"""Chinese messages of pydantic's error types; any other type reads as ``value_error``
(English says :meth:`~foureyes.core.validation.ValidationProblem.message`)."""


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error statuses a route really answers with.

    Each status gets the :class:`ErrorBody` schema and the codes it may carry, so the
    document, schemathesis and clients know every answer a route can give.
    """
    described: dict[int | str, dict[str, Any]] = {}
    for status in sorted(statuses):
        codes = ", ".join(f"`{code.value}`" for code in ErrorCode if code.status == status)
        if not codes:
            raise UsageError(f"no error code answers with status {status}")
        described[status] = {
            "model": ErrorBody,
            "description": f"Error: {codes}{_OPENAPI_NOTES.get(status, '')}.",
        }
    return described


class ApiError(HTTPException):
    """Raised by a handler or dependency to answer with the JSON error of ``code``.

    It is a Starlette ``HTTPException``, so FastAPI passes it through unchanged even
    when it is raised while the body is being read.

    Attributes:
        code: what went wrong; fixes the status and the type.
        param: the request field at fault, if any.
        values: the placeholders of the code's message (``limit``, ``detail``, ...).
    """

    def __init__(
        self,
        code: ErrorCode,
        *,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
        **values: object,
    ) -> None:
        code.message(Locale.EN, **values)  # a wrong placeholder is a bug: fail where raised
        super().__init__(code.status, detail=code.value, headers=headers)
        self.code = code
        self.param = param
        self.values = values

    def response(self, locale: Locale) -> JSONResponse:
        """The JSON response in ``locale``."""
        return error_response(
            self.code, locale, param=self.param, headers=self.headers, **self.values
        )


def error_response(
    code: ErrorCode,
    locale: Locale = Locale.EN,
    *,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
    **values: object,
) -> JSONResponse:
    """The JSON error response of ``code``, its message in ``locale``.

    Raises:
        UsageError: ``values`` do not fill the message's placeholders exactly.
    """
    body = _error_body(code, locale, param, values)
    return JSONResponse(body, status_code=code.status, headers=dict(headers or {}))


def _error_body(
    code: ErrorCode, locale: Locale, param: str | None, values: Mapping[str, object]
) -> dict[str, dict[str, Any]]:
    return {
        "error": {
            "message": code.message(locale, **values),
            "type": code.type,
            "code": code.value,
            "param": param,
        }
    }


def locale_from_accept_language(header: str | None) -> Locale:
    """The locale an ``Accept-Language`` header prefers; English when it names none of ours.

    Traditional Chinese is chosen for ``zh-Hant``, ``zh-TW``, ``zh-HK`` and ``zh-MO``;
    any other ``zh`` tag means Simplified. Quality values are honoured; ties keep order.
    """
    best: tuple[float, Locale] | None = None
    for part in (header or "").split(","):
        tag, *params = (piece.strip() for piece in part.split(";"))
        locale = _locale_of_tag(tag.lower())
        if locale is None:
            continue
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0 and (best is None or quality > best[0]):
            best = (quality, locale)
    return Locale.EN if best is None else best[1]


def _locale_of_tag(tag: str) -> Locale | None:
    if tag == "zh" or tag.startswith("zh-"):
        traditional = ("zh-hant", "zh-tw", "zh-hk", "zh-mo")
        return Locale.ZH_HANT if tag.startswith(traditional) else Locale.ZH_HANS
    if tag == "en" or tag.startswith("en-"):
        return Locale.EN
    return None


def _locale(request: Request) -> Locale:
    return locale_from_accept_language(request.headers.get("accept-language"))


def _trace_id(request: Request) -> str | None:
    trace_id = getattr(request.state, "trace_id", None)
    return trace_id if isinstance(trace_id, str) else None


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response(_locale(request))


async def _invalid_request(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, InvalidRequest)
    return error_response(
        ErrorCode.INVALID_REQUEST, _locale(request), param=exc.param, detail=exc.problem
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    locale = _locale(request)
    headers = exc.headers
    if exc.status_code == 404:
        return error_response(ErrorCode.NOT_FOUND, locale, headers=headers)
    if exc.status_code == 405:
        return error_response(
            ErrorCode.METHOD_NOT_ALLOWED, locale, headers=headers, method=request.method
        )
    if exc.status_code == 400:
        # FastAPI raises this with a fixed English reason, never the request's content.
        detail = exc.detail or "unreadable request"
        return error_response(ErrorCode.BAD_REQUEST, locale, headers=headers, detail=detail)
    if 400 < exc.status_code < 500:
        body = {
            "error": {
                "message": exc.detail or f"HTTP {exc.status_code}",
                "type": _TYPES.get(exc.status_code, "invalid_request_error"),
                "code": None,
                "param": None,
            }
        }
        return JSONResponse(body, status_code=exc.status_code, headers=headers)
    return await _unexpected(request, exc)


def _validation_error(screen: TextScreen | None) -> Callable[[Request, Exception], Any]:
    async def handle(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        locale = _locale(request)
        errors = list(exc.errors())
        for error in errors:
            if error.get("type") == "json_invalid":
                reason = error.get("ctx", {}).get("error", "JSON decode error")
                position = error.get("loc", ("body", None))[-1]
                detail = _json_detail(str(reason), position, locale)
                return error_response(ErrorCode.INVALID_JSON, locale, detail=detail)
        inside = [{**error, "loc": _inside(error.get("loc", ()))} for error in errors]
        problems = explain_errors(inside, _body_model(request))
        detail = _validation_detail(problems, locale)
        refused = [e for e in errors if e.get("type") == INVALID_TEXT]
        if not refused:
            first = problems[0].path if problems else ""
            return error_response(
                ErrorCode.INVALID_REQUEST, locale, param=first or None, detail=detail
            )
        param = ".".join(str(part) for part in _inside(refused[0].get("loc", ()))) or None
        texts = [
            e["input"]
            for e in refused
            if e.get("ctx", {}).get("screen") and isinstance(e.get("input"), str)
        ]
        # Screened even when no message text was refused: the body's readable messages are.
        resources = screen(request, texts, exc.body) if screen is not None else None
        if resources is None:
            return error_response(ErrorCode.INVALID_TEXT, locale, param=param, detail=detail)
        # In the error object, where OpenAI clients keep an error's body.
        code = ErrorCode.INVALID_TEXT_CRISIS
        body = _error_body(code, locale, param, {"detail": detail})
        body["error"]["resources"] = resources
        return JSONResponse(body, status_code=code.status)

    return handle


def _json_detail(reason: str, position: object, locale: Locale) -> str:
    """Where the JSON broke: the decoder's reason in English, only the position in Chinese.

    The decoder's words are English and not translated.
    """
    at = position if isinstance(position, int) else None
    if locale is _EN:
        return reason if at is None else f"{reason} (at position {at})"
    where = _DETAIL_WORDS["position"][locale].format(position=at) if at is not None else ""
    return _DETAIL_WORDS["json"][locale] + where


def _validation_detail(problems: Sequence[ValidationProblem], locale: Locale) -> str:
    """Each problem's field and what it expects, in ``locale``.

    Only locations, the kind of value given and what is expected: the offending input is
    never echoed back. English says it as :func:`~foureyes.core.validation.explain_errors`
    does; Chinese in its own words per error type (:data:`_VALIDATION`), so no English
    validation text is embedded in a Chinese message.
    """
    described = [_described(problem, locale) for problem in problems]
    if len(described) > _MAX_DETAILS:
        more = len(described) - _MAX_DETAILS
        described = [
            *described[:_MAX_DETAILS],
            _DETAIL_WORDS["more"][locale].format(count=more),
        ]
    separator = "; " if locale is _EN else "；"
    return separator.join(described) or _DETAIL_WORDS["invalid"][locale]


def _described(problem: ValidationProblem, locale: Locale) -> str:
    if locale is _EN:
        message = problem.message(echo=False)
        return message if problem.path else f"{_DETAIL_WORDS['body'][locale]}: {message}"
    where = problem.path or _DETAIL_WORDS["body"][locale]
    template = _VALIDATION.get(problem.type, _VALIDATION["value_error"])[locale]
    ctx = problem.ctx
    try:
        text = template.format(**{key: ctx[key] for key in _CTX_KEYS if key in ctx})
    except (KeyError, IndexError):
        text = _VALIDATION["value_error"][locale]
    if problem.suggestion:
        text += _DETAIL_WORDS["mean"][locale].format(name=problem.suggestion)
    return f"{where}：{text}"


def _inside(loc: Any) -> tuple[Any, ...]:
    """A location without FastAPI's first part (``body``, ``query``, ...)."""
    parts = tuple(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        return parts[1:]
    return parts


def _body_model(request: Request) -> type[BaseModel] | None:
    """The model of the route's one body, if it has one: its field names for "did you mean"."""
    route = request.scope.get("route")
    try:
        params = route.dependant.body_params  # type: ignore[union-attr]
    except AttributeError:
        return None
    if len(params) != 1 or getattr(params[0].field_info, "embed", None):
        return None
    model = params[0].field_info.annotation
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


async def _store_data_error(request: Request, exc: Exception) -> Response:
    # The store refused the request's own text: the same request would be refused again,
    # so it is the caller's bad input (422), not an outage to retry (503). Still nothing
    # was delivered (invariant 10).
    assert isinstance(exc, StoreDataError)
    log_event(
        server_logger,
        "store_refused_data",
        level="warning",
        trace_id=_trace_id(request),
        operation=exc.operation,
        detail=exc.detail,
    )
    return error_response(ErrorCode.UNSTORABLE_TEXT, _locale(request))


async def _store_error(request: Request, exc: Exception) -> Response:
    # docs/design.md 4, invariant 10: what the service cannot record, it does not deliver; the
    # request ends here with nothing served.
    assert isinstance(exc, StoreError)
    log_event(
        server_logger,
        "store_unavailable",
        level="error",
        trace_id=_trace_id(request),
        operation=exc.operation,
        detail=exc.detail,
    )
    return error_response(ErrorCode.STORE_UNAVAILABLE, _locale(request))


async def _unexpected(request: Request, exc: Exception) -> Response:
    # The outermost handler: the failure is logged (type and stack, not its message, which
    # may quote user text) and the client still gets a JSON body.
    log_event(
        server_logger,
        "request_failed",
        level="error",
        trace_id=_trace_id(request),
        exc_info=exc,
        known=isinstance(exc, FoureyesError),
    )
    return error_response(ErrorCode.INTERNAL_ERROR, _locale(request))


def install_error_handlers(app: FastAPI, *, screen: TextScreen | None = None) -> None:
    """Make every failure ``app`` answers a JSON error body (see the module docstring).

    Args:
        app: the application.
        screen: looks at a request refused for invalid text (the message texts that
            were refused, if any, and the body), and returns the crisis resources to
            attach to the 422, if any (:func:`foureyes.server.text.screen_refused_text`).
    """
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(InvalidRequest, _invalid_request)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error(screen))
    app.add_exception_handler(StoreDataError, _store_data_error)
    app.add_exception_handler(StoreError, _store_error)
    app.add_exception_handler(Exception, _unexpected)
