"""A real S3 server for tests: moto in server mode on 127.0.0.1, with authentication switched on.

The code under test gets only an endpoint URL and credentials, exactly as it would for MinIO.
"""

from __future__ import annotations

import json
import os
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

    def upload_tree(self, local: Path, bucket: str, prefix: str) -> int:
        client = self.client()
        count = 0
        for path in sorted(local.rglob("*")):
            if path.is_file():
                key = f"{prefix}/{path.relative_to(local).as_posix()}".lstrip("/")
                client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
                count += 1
        return count


def start() -> tuple[S3Server, object]:
    # moto reads this when it is imported: the first three requests (creating the test user) need no
    # credentials; every later request must carry that user's valid keys.
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    iam = boto3.client(
        "iam", endpoint_url=endpoint, aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap", region_name="us-east-1"
    )
    iam.create_user(UserName="proflake-test")
    iam.put_user_policy(UserName="proflake-test", PolicyName="all", PolicyDocument=_ADMIN_POLICY)
    key = iam.create_access_key(UserName="proflake-test")["AccessKey"]
    return S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"]), server
