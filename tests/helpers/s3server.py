"""A real S3 server for tests: moto in server mode on 127.0.0.1, with authentication switched on.

The code under test gets only an endpoint URL and credentials, exactly as it would for MinIO.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

_ADMIN_POLICY = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str

    def env(self) -> dict[str, str]:
        """Environment for a subprocess that should talk to this server through the standard variables."""
        return {
            **os.environ,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
        )

    def put_objects(self, bucket: str, keys: Iterable[str], body: bytes) -> None:
        """Objects written straight into the server's store (moto's S3 backend, in this process), not over
        HTTP: for a corpus whose upload is not what a test is about (1,050 PUTs over HTTP cost ~7 s of CPU,
        boto3's and the server's both in this process). What the code under test lists and reads of them
        still goes over HTTP, signed and checked."""
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]  # the test user's account (moto's default)
        for key in keys:
            backend.put_object(bucket, key, body)

    def upload_tree(self, local: Path, bucket: str, prefix: str) -> int:
        client = self.client()
        count = 0
        for path in sorted(local.rglob("*")):
            if path.is_file():
                key = f"{prefix}/{path.relative_to(local).as_posix()}".lstrip("/")
                client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
                count += 1
        return count


_counting: list[list[tuple[str, str]]] = []


@contextlib.contextmanager
def counted() -> Iterator[list[tuple[str, str]]]:
    """The requests this process's test S3 server receives inside the block, as (method, path with its
    query): how many a command makes is deterministic where its time is not."""
    seen: list[tuple[str, str]] = []
    _counting.append(seen)
    try:
        yield seen
    finally:
        _counting.remove(seen)


class _Server:
    """moto's server app (its dispatcher, Flask apps and backends: what ThreadedMotoServer serves) on
    werkzeug's threaded server in a thread of this process, with two costs per request taken out:

    * the dispatcher finds a request's backend from its host name by listing moto's package folder
      (~200 ``isdir`` calls) on every request; here it remembers each host's answer (~0.8 ms of CPU a
      request, a quarter of the server's own);
    * werkzeug logs every request at INFO (formatted, and under pytest captured twice); here only errors.
      For a request log while debugging: ``logging.getLogger("werkzeug").setLevel("INFO")`` and drop
      ``_QuietHandler``.

    Authentication and authorization are moto's, unchanged."""

    def __init__(self) -> None:
        import threading

        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        class Dispatcher(DomainDispatcherApplication):
            def __init__(self, create_app) -> None:
                super().__init__(create_app)
                self.known: dict[str | None, object] = {}

            def get_backend_for_host(self, host: str | None):  # called under the dispatcher's lock
                if host not in self.known:
                    self.known[host] = super().get_backend_for_host(host)
                return self.known[host]

        class QuietHandler(MotoRequestHandler):
            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                pass

            def parse_request(self) -> bool:
                parsed = super().parse_request()
                if parsed and _counting:  # when parsed, before it is answered: its client has not gone on
                    for seen in _counting:
                        seen.append((self.command, self.path))
                return parsed

        self._server = make_server("127.0.0.1", 0, Dispatcher(create_backend_app), threaded=True, request_handler=QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto-server", daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()


def start() -> tuple[S3Server, _Server]:
    # moto reads this when it is imported: the first three requests (creating the test user) need no
    # credentials; every later request must carry that user's valid keys.
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
    import boto3

    server = _Server()
    endpoint = server.endpoint
    iam = boto3.client(
        "iam", endpoint_url=endpoint, aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap", region_name="us-east-1"
    )
    iam.create_user(UserName="proflake-test")
    iam.put_user_policy(UserName="proflake-test", PolicyName="all", PolicyDocument=_ADMIN_POLICY)
    key = iam.create_access_key(UserName="proflake-test")["AccessKey"]
    _require_authentication(endpoint)
    return S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"]), server


def _require_authentication(endpoint: str) -> None:
    """moto reads INITIAL_NO_AUTH_ACTION_COUNT once, when it is first imported: had anything imported moto
    before start() set it, every request would pass unauthenticated (a plugin that did showed it:
    test_wrong_credentials_are_named_without_leaking_them then failed, the other S3 tests passed). So the
    server must refuse unknown keys before any test uses it (one request, ~5 ms)."""
    import boto3
    import botocore.exceptions

    stranger = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="AKIANOTAUSER00000000",
                            aws_secret_access_key="not-a-secret", region_name="us-east-1")
    try:
        stranger.list_buckets()
    except botocore.exceptions.ClientError as e:
        if e.response.get("Error", {}).get("Code") == "InvalidAccessKeyId":
            return
        raise
    raise RuntimeError("the test S3 server answered unknown keys: moto was imported before tests/helpers/s3server.py "
                       "set INITIAL_NO_AUTH_ACTION_COUNT, so its authentication is off")
