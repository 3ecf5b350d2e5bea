#!/usr/bin/env bash
# Download the wheels the GPU machine lacks (pydantic and its needs, cp312 manylinux)
# into .whl/, which .git/info/exclude keeps out of git; `device run` carries it.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir -p .whl
for spec in pydantic==2.14.3 pydantic-core==2.50.4 annotated-types==0.7.0 typing-inspection==0.4.2 typing-extensions==4.15.0; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "$spec"
done
ls .whl
