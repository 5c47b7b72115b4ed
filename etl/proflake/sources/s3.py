"""An S3 prefix as a source: paginated listing, bytes read into memory (no local mirror)."""

from __future__ import annotations

from collections.abc import Iterator

from proflake.sources.base import SourceObject
from proflake.sources.settings import S3Config, explain_client_error, split_s3_uri


class S3Source:
    def __init__(self, uri: str, config: S3Config | None = None) -> None:
        self.bucket, self.prefix = split_s3_uri(uri)
        self.uri = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self.config = config or S3Config.from_env()
        self._client = self.config.client()

    @property
    def root_parts(self) -> tuple[str, ...]:
        return (self.bucket, *[p for p in self.prefix.split("/") if p])

    def list(self) -> Iterator[SourceObject]:
        import botocore.exceptions

        prefix = f"{self.prefix}/" if self.prefix else ""
        paginator = self._client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", ()):
                    key = item["Key"]
                    if key.endswith("/"):
                        continue  # a "folder" placeholder object
                    parts = key.split("/")
                    unsafe = any(p in ("..", ".") for p in parts) or key.startswith("/")
                    yield SourceObject(
                        uri=f"s3://{self.bucket}/{key}",
                        parts=(self.bucket, *parts),
                        size=int(item["Size"]),
                        version=str(item.get("ETag", "")).strip('"'),
                        # A '..' in a key would climb out of the source's prefix if ever used as a path.
                        problem="has '.' or '..' path segments in its key; such keys are not read" if unsafe else None,
                        problem_kind="unsafe_path" if unsafe else None,
                    )
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
            raise explain_client_error(e, self.uri) from e

    def sizes(self) -> dict[str, int]:
        """Every object below the prefix, by its key relative to the prefix, and its size in bytes (what
        compaction and ``proflake check`` compare a store table's Delta log with)."""
        cut = len(self.uri) + 1
        return {obj.uri[cut:]: obj.size for obj in self.list()}

    def read(self, obj: SourceObject) -> bytes:
        import botocore.exceptions

        key = obj.uri[len(f"s3://{self.bucket}/") :]
        try:
            return self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
            raise explain_client_error(e, obj.uri) from e
