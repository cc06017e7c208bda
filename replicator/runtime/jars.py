"""The JVM jars a Spark session of the replicator needs beyond pyspark's own: declared once, here.

Three groups, each taken only when a run needs it:

* ``delta``: Delta Lake for Spark 4.0 (every run);
* ``kafka``: Spark's Kafka source and its runtime dependencies (``--reader spark``, and the bench's
  Structured Streaming peer);
* ``s3``: Hadoop's S3A file system and the AWS SDK v2 modules it uses (``s3a://`` warehouses).

The list is flat and exact (every jar with its version, no transitive resolution) because
transitive resolution is what broke: ``spark-sql-kafka-0-10`` 4.0.1 declares
``spark-token-provider-kafka-0-10`` 4.0.1, which the Maven Central mirror of these machines lacks (4.0.0
is the same code within the patch line), and ``hadoop-aws`` declares the SDK's 558 MB ``bundle``,
which also puts slf4j 1.7 ahead of Spark's. pyspark ships the rest (Scala, Netty,
httpcomponents, slf4j, commons-*): a second copy at another version would clash.

Both ways of getting them use this list: ``make spark-jars`` (``replicator jars --all --into
.cache/spark-jars``) in a checkout, and, for a pip-installed replicator with no jar directory, the
session factory's fallback, which fetches the groups a run needs into a per-user cache
(``REPLICATOR_JARS_CACHE``, default ``~/.cache/replicator/jars``) from Maven Central or
``REPLICATOR_MAVEN_REPOSITORY``. A jar already in the local Maven repository (``~/.m2``) is copied,
not downloaded. Every file is checked against the repository's SHA-1 before it is used.

Pure: no Spark, no Kafka.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from replicator.errors import ConfigError

log = logging.getLogger("replicator")

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
REPOSITORY_ENV = "REPLICATOR_MAVEN_REPOSITORY"
CACHE_ENV = "REPLICATOR_JARS_CACHE"
JARS_DIR_ENV = "REPLICATOR_SPARK_JARS"

DELTA_VERSION = "4.0.1"
SPARK_VERSION = "4.0.1"
# 4.0.1 of this helper jar is missing from the Maven Central mirror these machines use; 4.0.0 is the
# same code within the 4.0 patch line (the Kafka source only calls its delegation-token utilities).
SPARK_TOKEN_PROVIDER_VERSION = "4.0.0"
KAFKA_CLIENTS_VERSION = "3.9.1"  # as spark-sql-kafka-0-10 4.0.1 declares it
COMMONS_POOL2_VERSION = "2.12.0"  # likewise
HADOOP_VERSION = "3.4.1"  # pyspark 4.0.1's Hadoop client
# s3-transfer-manager was never published at 2.24.6, the SDK version hadoop-aws 3.4.1 declares; S3A
# fails without it (NoClassDefFoundError .../transfer/s3/model/ObjectTransfer).
AWS_SDK_VERSION = "2.24.8"


@dataclass(frozen=True, slots=True)
class Artifact:
    """One jar in a Maven repository."""

    group: str
    name: str
    version: str

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.name}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.name}-{self.version}.jar"

    @property
    def repository_path(self) -> str:
        return f"{self.group.replace('.', '/')}/{self.name}/{self.version}/{self.file_name}"


def _sdk(*names: str) -> list[Artifact]:
    return [Artifact("software.amazon.awssdk", n, AWS_SDK_VERSION) for n in names]


GROUPS: dict[str, tuple[Artifact, ...]] = {
    "delta": (
        Artifact("io.delta", "delta-spark_2.13", DELTA_VERSION),
        Artifact("io.delta", "delta-storage", DELTA_VERSION),
    ),
    "kafka": (
        Artifact("org.apache.spark", "spark-sql-kafka-0-10_2.13", SPARK_VERSION),
        Artifact("org.apache.spark", "spark-token-provider-kafka-0-10_2.13", SPARK_TOKEN_PROVIDER_VERSION),
        Artifact("org.apache.kafka", "kafka-clients", KAFKA_CLIENTS_VERSION),
        Artifact("org.apache.commons", "commons-pool2", COMMONS_POOL2_VERSION),
    ),
    "s3": (
        Artifact("org.apache.hadoop", "hadoop-aws", HADOOP_VERSION),
        # The SDK modules S3A uses (s3, s3-transfer-manager, sts) with their SDK dependencies.
        *_sdk("s3", "s3-transfer-manager", "sts", "aws-xml-protocol", "aws-query-protocol", "protocol-core",
              "arns", "profiles", "crt-core", "http-auth", "http-auth-spi", "http-auth-aws", "identity-spi",
              "checksums", "checksums-spi", "sdk-core", "auth", "http-client-spi", "regions", "annotations",
              "utils", "aws-core", "metrics-spi", "json-utils", "third-party-jackson-core", "endpoints-spi",
              "apache-client", "netty-nio-client"),
        Artifact("software.amazon.eventstream", "eventstream", "1.0.1"),
        Artifact("org.reactivestreams", "reactive-streams", "1.0.4"),
    ),
}
"""group -> its jars; the one declaration of every jar version the replicator's Spark session uses."""

ALL_GROUPS = tuple(GROUPS)
REQUIRED: set[str] = {"delta"}
"""The groups asked for so far by this process (`require`); a test may set it to start over."""


def require(*groups: str) -> None:
    """Ask for a group's jars in the Spark session this process will start (the CLI calls it from
    its settings, the warehouse for an object-store root). No effect on a session already running."""
    unknown = set(groups) - set(GROUPS)
    if unknown:
        raise ValueError(f"unknown jar group(s) {sorted(unknown)}; known: {', '.join(GROUPS)}")
    REQUIRED.update(groups)


def required() -> tuple[str, ...]:
    """The groups asked for so far, in declaration order."""
    return tuple(g for g in GROUPS if g in REQUIRED)


def artifacts(groups: Iterable[str]) -> list[Artifact]:
    wanted = set(groups)
    return [a for g in GROUPS if g in wanted for a in GROUPS[g]]


def needs_s3(url: str) -> bool:
    """Whether a warehouse or archive location is reached through S3A."""
    return urlsplit(url).scheme.lower() in ("s3a", "s3", "s3n")


class JarResolutionError(ConfigError):
    """A jar the session needs could not be had: names it, the repository tried, and the remedy."""


REMEDY = (f"point {JARS_DIR_ENV} at a directory holding the jars (`replicator jars --into DIR` where a repository "
          f"is reachable), set {REPOSITORY_ENV} to a Maven mirror, or under spark-submit pass them with "
          "--jars / --packages")


def repository() -> str:
    return os.environ.get(REPOSITORY_ENV, "").strip().rstrip("/") or MAVEN_CENTRAL


def cache_dir() -> Path:
    configured = os.environ.get(CACHE_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "replicator" / "jars"


def missing_from(directory: Path, groups: Iterable[str]) -> list[Artifact]:
    """The declared jars of `groups` that `directory` lacks (by artifact name, any version: a user's
    own directory may hold other builds of them)."""
    present = [p.name for p in directory.glob("*.jar")]
    return [a for a in artifacts(groups) if not any(n.startswith(f"{a.name}-") and n[len(a.name) + 1:][:1].isdigit()
                                                        for n in present)]


def _sha1(path: Path) -> str:
    digest = hashlib.sha1(usedforsecurity=False)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _get(url: str, timeout: float) -> bytes:
    if url.startswith("file:"):
        return Path(urllib.request.url2pathname(urlsplit(url).path)).read_bytes()
    request = urllib.request.Request(url, headers={"User-Agent": "replicator"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        data: bytes = response.read()
        return data


def fetch(groups: Iterable[str], into: Path, *, repo: str | None = None, timeout: float = 120.0,
          local_repository: Path | None = None) -> list[Path]:
    """Make `into` hold every declared jar of `groups` (verified against the repository's SHA-1) and
    return their paths. Jars already there are kept; one in the local Maven repository is copied.
    JarResolutionError names the first jar that could not be had."""
    repo = (repo or repository()).rstrip("/")
    m2 = local_repository if local_repository is not None else Path.home() / ".m2" / "repository"
    into.mkdir(parents=True, exist_ok=True)
    wanted = artifacts(groups)
    _drop_other_versions(into, wanted)
    paths = []
    for art in wanted:
        target = into / art.file_name
        paths.append(target)
        if target.is_file():
            continue
        url = f"{repo}/{art.repository_path}"
        try:
            expected = _get(url + ".sha1", timeout).decode("ascii", "replace").split()[0].strip().lower()
            local = m2 / art.repository_path
            fd, tmp_name = tempfile.mkstemp(prefix=f".{art.file_name}.", dir=into)
            tmp = Path(tmp_name)
            try:
                with os.fdopen(fd, "wb") as out:
                    if local.is_file():
                        with local.open("rb") as src:
                            shutil.copyfileobj(src, out)
                    else:
                        out.write(_get(url, timeout))
                if local.is_file() and _sha1(tmp) != expected:  # a damaged local copy: the repository's
                    tmp.write_bytes(_get(url, timeout))
                actual = _sha1(tmp)
                if actual != expected:
                    raise JarResolutionError(
                        f"{art.coordinate} from {repo} does not match its SHA-1 ({actual} != {expected}): {REMEDY}")
                os.replace(tmp, target)
            finally:
                tmp.unlink(missing_ok=True)
        except JarResolutionError:
            raise
        except (urllib.error.URLError, OSError, ValueError, IndexError) as exc:
            reason = getattr(exc, "reason", None) or exc
            if isinstance(exc, urllib.error.HTTPError):
                reason = f"HTTP {exc.code} {exc.reason}"
            raise JarResolutionError(f"cannot fetch {art.coordinate} from {repo} ({reason}): {REMEDY}") from None
    if "s3" in set(groups):
        try:
            paths.append(build_commit_store(into))
        except JarResolutionError as exc:  # an s3a:// run then refuses to start, saying why (commitfence.py)
            log.warning("%s", exc)
    return paths


COMMIT_STORE_JAR = "replicator-s3commit.jar"
COMMIT_STORE_CLASS = "replicator.s3commit.ConditionalS3LogStore"
FENCE_CLASS = "replicator.s3commit.Fence"
PIN_CLASS = "replicator.s3commit.Pin"
LOCAL_LOG_STORE_CLASS = "replicator.s3commit.LocalListingLogStore"  # file:// tables' log, listed by name first
CHECKPOINT_FILE_MANAGER_CLASS = "replicator.s3commit.DirectPutCheckpointFileManager"  # one PUT per .crc on s3a
DATA_FILE_FS_CLASS = "replicator.s3commit.DataFileS3AFileSystem"  # s3a: a small data file read with one GET
_COMMIT_STORE_SOURCES = Path(__file__).with_name("java") / "s3commit"


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME", "").strip()
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def build_commit_store(into: Path) -> Path:
    """The replicator's own Delta log store for s3a:// (commits written only if absent, fenced by
    the writer lease: java/s3commit), compiled from the sources shipped with the package into
    `into` beside the jars it builds on. Not on Maven: built here, once per source change (a
    stamp file keeps the sources' digest). Needs a JDK's javac."""
    sources = sorted(_COMMIT_STORE_SOURCES.glob("*.java"))
    digest = hashlib.sha1(b"".join(p.read_bytes() for p in sources)).hexdigest()
    target, stamp = into / COMMIT_STORE_JAR, into / f".{COMMIT_STORE_JAR}.sha1"
    if target.is_file() and stamp.is_file() and stamp.read_text().strip() == digest:
        return target
    javac = _javac()
    spec = importlib.util.find_spec("pyspark")
    if javac is None or spec is None or spec.origin is None:
        raise JarResolutionError(
            f"cannot build {COMMIT_STORE_JAR} (the s3a commit store) into {into}: it needs a JDK's javac on PATH or in "
            "JAVA_HOME, and pyspark installed; or point " f"{JARS_DIR_ENV} at a directory that holds it")
    # pyspark's own jars: Hadoop's API, and Spark's for the checkpoint file manager
    spark_jars = sorted((Path(spec.origin).parent / "jars").glob("*.jar"))
    needed = [into / a.file_name for g in ("delta", "s3") for a in GROUPS[g]]
    classpath = os.pathsep.join(str(p) for p in [*spark_jars, *needed])
    with tempfile.TemporaryDirectory(prefix="replicator-s3commit.") as tmp:
        done = subprocess.run([javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", tmp,
                               *map(str, sources)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise JarResolutionError(f"cannot build {COMMIT_STORE_JAR} into {into}: javac said: "
                                     f"{(done.stderr or done.stdout).strip()[:2000]}")
        fd, tmp_jar = tempfile.mkstemp(prefix=f".{COMMIT_STORE_JAR}.", dir=into)
        os.close(fd)
        with zipfile.ZipFile(tmp_jar, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for cls in sorted(Path(tmp).rglob("*.class")):
                jar.write(cls, cls.relative_to(tmp).as_posix())
        os.chmod(tmp_jar, 0o644)
        os.replace(tmp_jar, target)
    stamp.write_text(digest + "\n")
    return target


def _drop_other_versions(into: Path, wanted: list[Artifact]) -> None:
    """Remove other versions of the declared jars from `into` (after a version change): two
    versions of one jar on a class path is the clash the flat list exists to avoid."""
    names = {a.file_name for a in wanted}
    for old in into.glob("*.jar"):
        if old.name in names:
            continue
        for art in wanted:
            rest = old.name[len(art.name) + 1:]
            if old.name.startswith(f"{art.name}-") and rest[:1].isdigit() and rest.endswith(".jar"):
                old.unlink(missing_ok=True)
                break


def pom(groups: Iterable[str] = ALL_GROUPS) -> str:
    """The same jars as a Maven pom (each without its transitive dependencies), for a user who
    resolves through a Maven proxy: `mvn -f pom.xml dependency:copy-dependencies`."""
    deps = "\n".join(
        f"    <dependency><groupId>{a.group}</groupId><artifactId>{a.name}</artifactId><version>{a.version}</version>"
        "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>"
        for a in artifacts(groups))
    return ("<project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n  <modelVersion>4.0.0</modelVersion>\n"
            "  <groupId>replicator</groupId><artifactId>spark-jars</artifactId><version>1</version>"
            "<packaging>pom</packaging>\n"
            f"  <dependencies>\n{deps}\n  </dependencies>\n</project>\n")
