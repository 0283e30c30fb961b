#!/usr/bin/env bash
# Fetch stock Apache Kafka from Maven Central for the releases pinned in
# compat/kafka-versions.properties, and build the Java codec oracle against them.
#
# Layout, per pinned version <v> (all under compat/.cache/, which git ignores):
#   kafka-<v>/lib/        the runtime classpath (kafka_2.13, kafka-tools, kafka-shell, kafka-clients,
#                         kafka-metadata, kafka-raft, kafka-server-common, their dependencies
#                         and the release's logging binding), resolved by compat/maven/pom.xml
#   kafka-<v>/tools-lib/  only when kafka-versions.properties names a stand-in tools release
#                         (kafka.<v>.tools.version): that release's complete classpath with its
#                         kafka-tools and kafka-shell; lib/ then has neither
#   kafka-<v>/config/     log4j.properties (3.x) and log4j2.properties (4.x): WARN to stderr
#   kafka-<v>/oracle/     compat/oracle/src compiled against lib/ (for a release of the matrix
#                         outside kafka.versions: only the JDK-only tool runner, ToolRunner.java)
#   kafka-<v>/*.stamp     what each step was built from; a step whose inputs are unchanged is
#                         skipped, so a re-run does no network or compiler work
#
# Usage: bash compat/fetch-kafka.sh [<version> ... | all]
#   no argument: the releases `make test` uses (kafka.versions and kafka.cover.releases);
#   <version>: any release of kafka.releases (the release matrix), fetched on demand;
#   `all`: every release of the matrix.
# Needs: java and javac 17+, mvn, network access to Maven Central on first run.
set -euo pipefail

COMPAT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROPS="$COMPAT/kafka-versions.properties"
POM="$COMPAT/maven/pom.xml"
CACHE="$COMPAT/.cache"

die() { echo "fetch-kafka: $*" >&2; exit 1; }
say() { echo "fetch-kafka: $*" >&2; }

# prop KEY: the value of KEY in kafka-versions.properties (empty when absent).
prop() {
    sed -n "s/^[[:space:]]*$(printf '%s' "$1" | sed 's/\./\\./g')[[:space:]]*=[[:space:]]*//p" "$PROPS" \
        | tail -n 1 | sed 's/[[:space:]]*$//'
}

hash_of() { sha256sum | cut -c1-64; }

for tool in java javac mvn sha256sum flock; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not installed (need JDK 17+ with javac, and Maven)"
done
java_major="$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')"
[[ "${java_major:-0}" -ge 17 ]] 2>/dev/null || die "Java 17+ is required (found '${java_major:-?}')"

[[ -f "$PROPS" ]] || die "missing $PROPS"
IFS=',' read -r -a PINNED <<<"$(prop kafka.versions | tr -d '[:space:]')"
[[ ${#PINNED[@]} -gt 0 ]] || die "kafka.versions is empty in $PROPS"
IFS=',' read -r -a MATRIX <<<"$(prop kafka.releases | tr -d '[:space:]')"
[[ ${#MATRIX[@]} -gt 0 ]] || MATRIX=("${PINNED[@]}")

if [[ $# -eq 1 && "$1" == "all" ]]; then
    VERSIONS=("${MATRIX[@]}")
elif [[ $# -gt 0 ]]; then
    for want in "$@"; do
        [[ " ${MATRIX[*]} ${PINNED[*]} " == *" $want "* ]] \
            || die "$want is not pinned in $PROPS (kafka.releases: ${MATRIX[*]})"
    done
    VERSIONS=("$@")
else
    IFS=',' read -r -a COVER <<<"$(prop kafka.cover.releases | tr -d '[:space:]')"
    VERSIONS=("${PINNED[@]}" "${COVER[@]}")
fi

mkdir -p "$CACHE"
# Several checkouts' test runs may share this cache; one fetch at a time.
exec 9>"$CACHE/.fetch.lock"
flock 9

# fetch_lib VERSION DIR PROFILES: resolve Kafka VERSION's runtime classpath into DIR.
fetch_lib() {
    local version="$1" dir="$2" profiles="$3"
    local stamp_file="$dir.stamp" stamp
    stamp="$( { echo "kafka=$version profiles=$profiles"; cat "$POM"; } | hash_of )"
    if [[ -d "$dir" && -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]]; then
        return 0
    fi
    say "resolving Kafka $version ($profiles) from Maven Central into ${dir#"$COMPAT"/}"
    rm -rf "$dir" "$dir.tmp" "$stamp_file"
    mkdir -p "$(dirname "$dir")"
    if ! mvn -q -B -Dstyle.color=never -f "$POM" \
            -Dkafka.version="$version" \
            -Dlib.dir="$dir.tmp" \
            -P"$profiles" \
            dependency:copy-dependencies >"$dir.mvn.log" 2>&1; then
        cat "$dir.mvn.log" >&2
        die "Maven could not resolve Kafka $version (output above, kept in $dir.mvn.log)"
    fi
    rm -f "$dir.mvn.log"

    # The modules the harness relies on are there, and every Kafka module is this release.
    local jar name bad=0
    local wanted=(kafka_2.13 kafka-clients kafka-metadata kafka-raft kafka-server-common)
    [[ ",$profiles," == *",tools,"* ]] && wanted+=(kafka-tools kafka-shell)
    for name in "${wanted[@]}"; do
        [[ -f "$dir.tmp/$name-$version.jar" ]] || { say "missing $name-$version.jar"; bad=1; }
    done
    for jar in "$dir".tmp/kafka*.jar; do
        name="$(basename "$jar")"
        [[ "$name" == *"-$version.jar" ]] || { say "unexpected Kafka artifact $name"; bad=1; }
    done
    [[ $bad -eq 0 ]] || die "the resolved classpath for Kafka $version is not that release"

    mv "$dir.tmp" "$dir"
    echo "$stamp" >"$stamp_file"
}

write_config() {
    local home="$1"
    mkdir -p "$home/config"
    cp "$COMPAT/logging/log4j.properties" "$COMPAT/logging/log4j2.properties" "$home/config/"
}

build_oracle() {
    local version="$1" home="$2"
    local stamp_file="$home/oracle.stamp" stamp sources
    if [[ " ${PINNED[*]} " == *" $version "* ]]; then
        mapfile -t sources < <(find "$COMPAT/oracle/src" -name '*.java' | LC_ALL=C sort)
    else
        # The codec oracle is built for kafka.versions only (it uses their message classes); the
        # other releases of the matrix get the tool runner, which needs nothing but the JDK.
        mapfile -t sources < <(find "$COMPAT/oracle/src" -name 'ToolRunner.java')
    fi
    [[ ${#sources[@]} -gt 0 ]] || die "no Java sources under $COMPAT/oracle/src"
    stamp="$( { cat "$home/lib.stamp"; javac -version 2>&1; cat "${sources[@]}"; } | hash_of )"
    if [[ -d "$home/oracle" && -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]]; then
        return 0
    fi
    say "compiling the codec oracle against Kafka $version"
    rm -rf "$home/oracle" "$home/oracle.tmp" "$stamp_file"
    javac -nowarn --release 17 -encoding UTF-8 -cp "$home/lib/*" -d "$home/oracle.tmp" "${sources[@]}" \
        || die "the codec oracle does not compile against Kafka $version"
    mv "$home/oracle.tmp" "$home/oracle"
    echo "$stamp" >"$stamp_file"
}

logging_profile() { if [[ "${1%%.*}" -ge 4 ]]; then echo log4j2; else echo reload4j; fi; }

for version in "${VERSIONS[@]}"; do
    [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "malformed version '$version' in $PROPS"
    home="$CACHE/kafka-$version"
    tools_version="$(prop "kafka.$version.tools.version")"
    tools_version="${tools_version:-$version}"
    if [[ "$tools_version" == "$version" ]]; then
        fetch_lib "$version" "$home/lib" "$(logging_profile "$version"),tools"
        rm -rf "$home/tools-lib" "$home/tools-lib.stamp"
    else
        [[ "$tools_version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] \
            || die "malformed kafka.$version.tools.version '$tools_version' in $PROPS"
        fetch_lib "$version" "$home/lib" "$(logging_profile "$version")"
        fetch_lib "$tools_version" "$home/tools-lib" "$(logging_profile "$tools_version"),tools"
    fi
    write_config "$home"
    build_oracle "$version" "$home"
done
say "ready: ${VERSIONS[*]} under $CACHE"
