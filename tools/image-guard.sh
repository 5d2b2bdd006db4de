#!/usr/bin/env bash
# Immutable image tags (.github/workflows/images.yml): `image-guard.sh <image>:<tag> <changed: true|false>`.
#
# <tag> is the version config/versions.ts deploys; once published it is never overwritten.
# - published and <changed> (this change touches the image's build inputs, `npm run images -- --base`): fail,
#   asking for a version bump in config/versions.ts;
# - published, unchanged: nothing to push (publish=false);
# - not published: push it (publish=true).
# Writes publish=true|false to $GITHUB_OUTPUT (stdout without it).
#
# "Not published" is a registry answer of not found / manifest or name unknown, or denied / unauthorized: GHCR
# answers a package that does not exist yet with a denial, and a token that may not read a tag may not push it
# either, so nothing is overwritten. Any other failure (network, 5xx) fails the job rather than guess.
set -euo pipefail

ref="${1:?usage: image-guard.sh <image>:<tag> <changed: true|false>}"
changed="${2:?usage: image-guard.sh <image>:<tag> <changed: true|false>}"

if out="$(docker buildx imagetools inspect "$ref" 2>&1)"; then
  published=true
elif grep -qiE 'not found|manifest unknown|name unknown|no such manifest|denied|unauthorized|forbidden' <<<"$out"; then
  published=false
else
  echo "::error title=Cannot tell whether ${ref} is published::docker buildx imagetools inspect failed: ${out//$'\n'/ }"
  exit 1
fi

if [ "$published" = true ] && [ "$changed" = true ]; then
  echo "::error title=Image tag ${ref} is already published::This change modifies the image's build inputs, and a published tag is never overwritten. Bump the image's version in config/versions.ts (the tag the Pulumi program deploys)."
  exit 1
fi
if [ "$published" = true ]; then
  echo "::notice title=${ref} already published::its build inputs did not change; nothing to push."
  publish=false
else
  echo "${ref} is not published yet."
  publish=true
fi

if [ -n "${GITHUB_OUTPUT:-}" ]; then echo "publish=${publish}" >> "$GITHUB_OUTPUT"; else echo "publish=${publish}"; fi
