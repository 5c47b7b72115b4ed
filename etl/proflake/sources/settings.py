"""S3 settings shared by the S3 source, the S3 store and the lock.

A user sets only what they would for the AWS CLI: credentials (environment, profile, or the rest of
the standard chain) and, for MinIO or another S3-compatible server, an endpoint (``--endpoint-url`` or
``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``). Everything the libraries need beyond that — the
endpoint passed to deltalake (which, like pyarrow, does not read those variables), ``AWS_ALLOW_HTTP``
for an http:// endpoint, retries — is derived here.
"""

from __future__ import annotations

import os
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
        import boto3
        import botocore.exceptions

        try:
            return boto3.Session(profile_name=self.profile, region_name=self.region)
        except botocore.exceptions.ProfileNotFound as e:
            raise ProflakeError(f"AWS profile {self.profile!r} is not configured; check ~/.aws/config, or drop --aws-profile") from e

    def client(self, max_pool: int = 16):
        from botocore.config import Config

        config = Config(
            retries={"mode": "standard", "max_attempts": 8},
            max_pool_connections=max_pool,
            connect_timeout=10,
            read_timeout=60,
        )
        return self.session.client("s3", endpoint_url=self.endpoint_url, config=config)

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


def explain_client_error(error: Exception, what: str) -> ProflakeError:
    """One sentence for an S3 failure, naming the thing and what to do. Never echoes credentials."""
    import botocore.exceptions as bce

    if isinstance(error, bce.NoCredentialsError):
        return ProflakeError("no AWS credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or pass --aws-profile")
    if isinstance(error, (bce.EndpointConnectionError, bce.ConnectTimeoutError)):
        return ProflakeError(f"cannot reach the S3 endpoint for {what}; check --endpoint-url / AWS_ENDPOINT_URL and the network")
    if isinstance(error, bce.ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("NoSuchBucket",):
            return ProflakeError(f"bucket of {what} does not exist; check the bucket name")
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "InvalidClientTokenId"):
            return ProflakeError(f"S3 rejected the credentials for {what} ({code}); check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or --aws-profile")
        if code in ("AccessDenied", "403") or status == 403:
            return ProflakeError(f"access denied to {what}; the credentials lack permission for it")
        if code in ("NoSuchKey", "404") or status == 404:
            return ProflakeError(f"{what} does not exist")
        return ProflakeError(f"S3 error for {what}: {code or status}")
    if isinstance(error, bce.BotoCoreError):
        return ProflakeError(f"S3 error for {what}: {type(error).__name__}")
    return ProflakeError(f"S3 error for {what}: {error}")


def client_error_code(error: Any) -> str:
    try:
        return error.response.get("Error", {}).get("Code", "")
    except AttributeError:
        return ""
