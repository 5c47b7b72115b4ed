"""S3 settings shared by the S3 source, the S3 store and the lock.

A user sets only what they would for the AWS CLI: credentials (environment, profile, or the rest of
the standard chain) and, for MinIO or another S3-compatible server, an endpoint (``--endpoint-url`` or
``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``). Everything the libraries need beyond that — the
endpoint passed to deltalake (which, like pyarrow, does not read those variables), ``AWS_ALLOW_HTTP``
for an http:// endpoint, retries — is derived here.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from proflake.errors import ProflakeError, SourceError

S3_SCHEME = "s3://"


def is_s3(location: str) -> bool:
    return str(location).startswith(S3_SCHEME)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """s3://bucket/some/prefix -> ("bucket", "some/prefix") (no leading or trailing slash)."""
    if not is_s3(uri):
        raise SourceError(f"{uri!r} is not an s3:// URI")
    bucket, _, prefix = uri[len(S3_SCHEME) :].partition("/")
    if not bucket:
        raise SourceError(f"{uri!r} names no bucket; use s3://BUCKET/PREFIX")
    return bucket, prefix.strip("/")


@dataclass(frozen=True)
class S3Config:
    endpoint_url: str | None = None
    profile: str | None = None
    region: str | None = None

    @classmethod
    def from_env(cls, endpoint_url: str | None = None, profile: str | None = None) -> S3Config:
        endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        return cls(endpoint_url=endpoint or None, profile=profile or None)

    @cached_property
    def session(self):  # boto3.Session; typed loosely so importing proflake does not import boto3
        import botocore.exceptions

        try:
            return _boto3_session(self.profile, self.region)
        except botocore.exceptions.ProfileNotFound as e:
            raise ProflakeError(f"AWS profile {self.profile!r} is not configured; check ~/.aws/config, or drop --aws-profile") from e

    @cached_property
    def _clients(self) -> tuple[threading.Lock, dict[int, Any]]:
        return threading.Lock(), {}

    def client(self, max_pool: int = 16):
        """This configuration's S3 client with a connection pool of ``max_pool``: one per pool size, made
        on first use and shared (a boto3 client is thread-safe; making one costs ~20-80 ms of CPU, and a
        batch on S3 asked for dozens: the lock, each commit's checksums, the check, the catalog). Its
        credentials are the session's, refreshed by botocore where they are refreshable."""
        from botocore.config import Config

        lock, made = self._clients
        with lock:  # a boto3 Session is not thread-safe: clients are made one at a time
            if max_pool not in made:
                config = Config(
                    retries={"mode": "standard", "max_attempts": 8},
                    max_pool_connections=max_pool,
                    connect_timeout=10,
                    read_timeout=60,
                )
                made[max_pool] = self.session.client("s3", endpoint_url=self.endpoint_url, config=config)
            return made[max_pool]

    def bucket_region(self, bucket: str) -> str | None:
        """The region S3 says ``bucket`` is in (its x-amz-bucket-region header), or None if it cannot tell."""
        try:
            answer = self.client().head_bucket(Bucket=bucket)
            return answer["ResponseMetadata"]["HTTPHeaders"].get("x-amz-bucket-region")
        except Exception as e:  # noqa: BLE001 - a 301/403 answer still carries the header
            headers = getattr(e, "response", {}).get("ResponseMetadata", {}).get("HTTPHeaders", {})
            return headers.get("x-amz-bucket-region")

    def storage_options(self) -> dict[str, str]:
        """Options for deltalake (object_store): explicit endpoint and frozen credentials."""
        options: dict[str, str] = {}
        credentials = self.session.get_credentials()
        if credentials is None:
            raise ProflakeError(
                "no AWS credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or pass --aws-profile"
            )
        frozen = credentials.get_frozen_credentials()
        options["AWS_ACCESS_KEY_ID"] = frozen.access_key
        options["AWS_SECRET_ACCESS_KEY"] = frozen.secret_key
        if frozen.token:
            options["AWS_SESSION_TOKEN"] = frozen.token
        options["AWS_REGION"] = self.session.region_name or "us-east-1"
        if self.endpoint_url:
            options["AWS_ENDPOINT_URL"] = self.endpoint_url
            if self.endpoint_url.startswith("http://"):
                options["AWS_ALLOW_HTTP"] = "true"
        return options


_LOADERS: dict[Any, Any] = {}  # botocore data path -> its botocore Loader, shared by this process's sessions
_LOADERS_LOCK = threading.Lock()


def _boto3_session(profile: str | None, region: str | None):  # boto3.Session
    """A new boto3 session for ``profile`` whose botocore data loader (the parsed endpoint and service
    models) is shared with every session this process made before with the same data path. Each session
    used to parse those JSON files again: a session and its S3 client cost 134 ms of CPU, 15 ms with the
    shared loader (botocore caches what a loader parsed on the loader; its clients already share it within
    a session). Raises botocore's ProfileNotFound for a profile that is not configured."""
    import boto3
    import botocore.loaders
    import botocore.session

    core = botocore.session.Session(profile=profile)
    data_path = core.get_config_variable("data_path")
    with _LOADERS_LOCK:
        loader = _LOADERS.get(data_path)
        if loader is None:
            loader = _LOADERS[data_path] = botocore.loaders.create_loader(data_path)
        core.register_component("data_loader", loader)
        session = boto3.Session(botocore_session=core, region_name=region)
        # boto3 appends its own data folder to the loader's paths for every session: keep one of each
        loader.search_paths[:] = list(dict.fromkeys(loader.search_paths))
    return session


_REJECTED = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "InvalidClientTokenId", "UnrecognizedClientException")
_EXPIRED = ("ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired")
_WRONG_REGION = ("PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException", "301")
_THROTTLED = ("SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests", "503")
_CREDENTIALS_HELP = "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or --aws-profile"


def explain_s3_failure(
    what: str,
    *,
    code: str = "",
    status: int | None = None,
    unreachable: bool = False,
    retries: int | None = None,
    region: str | None = None,
    key: str | None = None,
) -> ProflakeError:
    """The one sentence for an S3 failure, whichever library met it. Never names credentials."""
    tried = f" after {retries} retries" if retries else ""
    if unreachable:
        return SourceError(
            f"cannot reach the S3 endpoint for {what}{tried} (connection refused, closed or timed out: an outage or a "
            "wrong --endpoint-url / AWS_ENDPOINT_URL); check the network and the endpoint, then run the command again"
        )
    if code in _EXPIRED:
        return SourceError(
            f"the AWS credentials expired while reading or writing {what} ({code}); renew them (aws sso login, a new "
            "session token) or use a profile or role that refreshes, then run the command again"
        )
    if code in _REJECTED:
        return SourceError(f"S3 rejected the credentials for {what} ({code}); {_CREDENTIALS_HELP}")
    if code in _WRONG_REGION or status == 301:
        where = f"region {region}" if region else "another region"
        return SourceError(
            f"the bucket of {what} is in {where}, not the one the request was signed for; "
            + (f"set AWS_REGION={region} (or the profile's region)" if region else "set AWS_REGION to the bucket's region")
        )
    if code == "NoSuchBucket":
        return SourceError(f"bucket of {what} does not exist; check the bucket name")
    if code in ("AccessDenied", "AllAccessDisabled", "403") or status == 403:
        target = f"s3://{key}" if key and not key.startswith("s3://") else key or what
        return SourceError(f"access denied to {target}; the credentials lack permission for it ({_CREDENTIALS_HELP})")
    if code in ("NoSuchKey", "404") or status == 404:
        return SourceError(f"{what} does not exist")
    if code in _THROTTLED or status in (429, 503):
        return SourceError(f"S3 kept throttling requests for {what}{tried} ({code or status}); run the command again later")
    if status is not None and status >= 500:
        return SourceError(
            f"S3 kept failing for {what}{tried} ({code or status}: a server-side outage); run the command again later"
        )
    return SourceError(f"S3 refused a request for {what} ({code or status or 'no answer'})")


def explain_client_error(error: Exception, what: str) -> ProflakeError:
    """One sentence for a boto3/botocore failure, naming the thing and what to do. Never echoes credentials."""
    import botocore.exceptions as bce

    if isinstance(error, bce.NoCredentialsError):
        return ProflakeError("no AWS credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or pass --aws-profile")
    if isinstance(error, (bce.EndpointConnectionError, bce.ConnectTimeoutError, bce.ConnectionClosedError,
                          bce.ReadTimeoutError, bce.ConnectionError)):
        return explain_s3_failure(what, unreachable=True)
    if isinstance(error, bce.ClientError):
        response = error.response or {}
        code = response.get("Error", {}).get("Code", "")
        meta = response.get("ResponseMetadata", {})
        headers = meta.get("HTTPHeaders", {}) or {}
        retries = meta.get("RetryAttempts") or None
        region = headers.get("x-amz-bucket-region") or response.get("Error", {}).get("Region")
        return explain_s3_failure(what, code=code, status=meta.get("HTTPStatusCode"), retries=retries, region=region)
    if isinstance(error, bce.BotoCoreError):
        return ProflakeError(f"S3 error for {what}: {type(error).__name__}")
    return ProflakeError(f"S3 error for {what}: {type(error).__name__}")


# object_store (deltalake's storage layer) reports S3 failures as an OSError whose text chains causes:
# "Generic S3 error ↳ Error performing GET http://host/bucket/key in 1.5s, after 10 retries ... ↳ 503 ...
# ↳ <Error><Code>SlowDown</Code>...". These patterns read that chain (compiled on first use, by re's
# cache: compiling them at import cost every command's start-up ~3 ms).
_OS_CODE = r"<Code>([^<]+)</Code>"
_OS_STATUS = r"(?:^|\s)([1-5]\d\d) [A-Z][A-Za-z ]+$"  # searched line by line (re.MULTILINE)
_OS_RETRIES = r"after (\d+) retries"
_OS_URL = r"Error performing \w+ (\S+)"
_OS_REGION = r"expecting '([a-z0-9-]+)'"
_OS_UNREACHABLE = ("error sending request", "connection closed", "Connection refused", "tcp connect error",
                   "dns error", "operation timed out", "connection reset")
_ANSI = r"\x1b\[[0-9;]*m"


def looks_like_object_store(text: str) -> bool:
    return "S3 error" in text or "Error performing" in text or "lacked the necessary privileges" in text


def explain_object_store_error(text: str, what: str, config: S3Config | None = None) -> ProflakeError:
    """One sentence for an object_store (deltalake) S3 failure; ``text`` is its full message."""
    text = re.sub(_ANSI, "", text)
    code = re.search(_OS_CODE, text)
    status = re.search(_OS_STATUS, text, re.MULTILINE)
    retries = re.search(_OS_RETRIES, text)
    url = re.search(_OS_URL, text)
    region = re.search(_OS_REGION, text)
    key = None
    if url:
        host, _, path = url.group(1).split("://", 1)[-1].partition("/")
        path = path.split("?", 1)[0]
        if ".s3." in host or ".s3-" in host:  # virtual-hosted style: the bucket is in the host name
            path = f"{host.split('.s3', 1)[0]}/{path}"
        key = path or None
    wrong_region = "incorrectly configured region" in text
    found_region = region.group(1) if region else None
    if wrong_region and found_region is None and key and config is not None:
        found_region = config.bucket_region(key.split("/", 1)[0])
    return explain_s3_failure(
        what,
        code=code.group(1) if code else ("301" if wrong_region else ""),
        status=int(status.group(1)) if status else (403 if "lacked the necessary privileges" in text else None),
        unreachable=not code and not status and any(s in text for s in _OS_UNREACHABLE),
        retries=int(retries.group(1)) if retries else None,
        region=found_region,
        key=key,
    )


def client_error_code(error: Any) -> str:
    try:
        return error.response.get("Error", {}).get("Code", "")
    except AttributeError:
        return ""
