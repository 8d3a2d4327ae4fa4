#!/usr/bin/env bash
# Extracts a newer lavapipe (Mesa 25.0.7 from Debian bookworm-backports) into a private folder, without touching
# the system's Vulkan driver (Debian 12's Mesa 22.3, which the other tests use).
#   scripts/fetch-lavapipe25.sh DEST
# It keeps its own apt sources list, lists and cache under DEST/.apt, downloads the packages with
# `apt-get download` and unpacks them with `dpkg -x` into DEST/root, checks with ldd that the lavapipe library
# resolves, and writes DEST/lvp_icd.json (absolute library_path) and DEST/env.sh. On stdout it prints only the
# environment to use, as shell `export` lines, so that `eval "$(scripts/fetch-lavapipe25.sh DEST)"` works:
#   VK_ICD_FILENAMES=DEST/lvp_icd.json  LD_LIBRARY_PATH=DEST/root/usr/lib/<triplet>[:old value]
# Idempotent: when DEST already holds this version it prints the environment and downloads nothing.
# Needs network access to the Debian mirror (the host the machine's own apt sources use) and apt-get/dpkg.
# Environment: KT_LVP_MIRROR overrides the mirror URI (default: the machine's Debian URI).
set -euo pipefail

MESA_UPSTREAM=25.0.7
SUITE=bookworm-backports
# From the backports suite (the newer lavapipe needs libdrm >= 2.4.121); anything else its library needs and the
# machine lacks is taken from bookworm/bookworm-backports as apt's candidate (see the ldd step below).
PKGS=(mesa-vulkan-drivers libdrm2 libdrm-amdgpu1)

die() { echo "fetch-lavapipe25: $*" >&2; exit 1; }
log() { echo "fetch-lavapipe25: $*" >&2; }

[ $# -eq 1 ] && [ -n "$1" ] || { echo "usage: $0 DEST" >&2; exit 2; }
case "$1" in -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
for t in apt-get apt-cache dpkg dpkg-deb ldd; do
  command -v "$t" >/dev/null 2>&1 || die "$t not found (a Debian/Ubuntu system is needed)"
done

TRIPLET=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null || true)
[ -n "$TRIPLET" ] || TRIPLET="$(uname -m)-linux-gnu"

mkdir -p "$(dirname -- "$1")"
DEST=$(cd "$(dirname -- "$1")" && pwd)/$(basename -- "$1")
STAMP="$DEST/.lavapipe-version"
LIBDIR="$DEST/root/usr/lib/$TRIPLET"

print_env() {
  # One source of truth: env.sh; stdout gets exactly its export lines.
  cat "$DEST/env.sh"
}

if [ -d "$DEST" ] && [ -n "$(ls -A "$DEST" | grep -vx '.lock')" ] && [ ! -f "$DEST/.lavapipe-owned" ]; then
  die "$DEST exists, is not empty and was not made by this script; give an empty or new folder"
fi
mkdir -p "$DEST"
# Two runs into one DEST (parallel builds) wait for each other instead of unpacking over each other.
if command -v flock >/dev/null 2>&1; then exec 9>"$DEST/.lock"; flock 9; fi
if [ -f "$STAMP" ] && grep -qx "$MESA_UPSTREAM" "$STAMP" && [ -f "$DEST/lvp_icd.json" ] && [ -f "$DEST/env.sh" ] \
   && [ -f "$LIBDIR/libvulkan_lvp.so" ]; then
  log "$DEST already holds lavapipe $MESA_UPSTREAM"
  print_env
  exit 0
fi

# The mirror: the URI the machine's own Debian sources use (deb822 .sources or one-line .list), else Debian's CDN.
mirror=${KT_LVP_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$( { cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n';
              cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
                | sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\{0,1\}\([^[:space:]]\+\).*/\2/p'; } \
            | grep -E '/debian/?$' | head -n 1 || true)
  mirror=${mirror%/}
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
fi
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$KEYRING" ] && SIGNED="[signed-by=$KEYRING] " || SIGNED=""

touch "$DEST/.lavapipe-owned"
APT="$DEST/.apt"
rm -rf "$APT" "$DEST/root" "$DEST/debs"
mkdir -p "$APT/etc/sources.list.d" "$APT/etc/preferences.d" "$APT/lists/partial" "$APT/cache/archives/partial" \
         "$DEST/debs" "$DEST/root"
{
  echo "deb ${SIGNED}$mirror $SUITE main"
  echo "deb ${SIGNED}$mirror bookworm main"
} > "$APT/etc/sources.list"
AOPTS=(-o "Dir::Etc::sourcelist=$APT/etc/sources.list" -o "Dir::Etc::sourceparts=$APT/etc/sources.list.d"
       -o "Dir::Etc::preferencesparts=$APT/etc/preferences.d" -o "Dir::State::Lists=$APT/lists"
       -o "Dir::Cache=$APT/cache" -o "APT::Sandbox::User=$(id -un)" -o "Debug::NoLocking=1")

log "reading $SUITE from $mirror (private lists in $APT)"
apt-get -qq "${AOPTS[@]}" update >&2 || die "apt-get update of the private list failed (network? mirror $mirror)"

cand() { apt-cache "${AOPTS[@]}" madison "$1" 2>/dev/null | awk -F'|' -v s="$2" '$3 ~ s {gsub(/ /,"",$2); print $2; exit}'; }
specs=()
for p in "${PKGS[@]}"; do
  v=$(cand "$p" "$SUITE/main")
  [ -n "$v" ] || die "$p not found in $SUITE"
  if [ "$p" = mesa-vulkan-drivers ]; then
    case "$v" in "$MESA_UPSTREAM"-*) ;; *) die "$SUITE has mesa-vulkan-drivers $v, not $MESA_UPSTREAM" ;; esac
  fi
  specs+=("$p=$v")
done

fetch() { (cd "$DEST/debs" && apt-get -qq "${AOPTS[@]}" download "$@" >&2) || die "apt-get download $* failed"; }
log "downloading ${specs[*]}"
fetch "${specs[@]}"

# Anything the driver package depends on that is not installed on this machine (a fresh machine may lack
# libLLVM or the X/Wayland client libraries): download apt's candidate too, so the private folder is complete.
deps=$(dpkg-deb -f "$DEST"/debs/mesa-vulkan-drivers_*.deb Depends | tr ',' '\n' | sed 's/[[:space:]]*(.*//; s/|.*//; s/^[[:space:]]*//' \
       | grep -v '^$' || true)
extra=()
for d in $deps; do
  case " ${PKGS[*]} " in *" $d "*) continue ;; esac
  dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q "install ok installed" || extra+=("$d")
done
if [ ${#extra[@]} -gt 0 ]; then
  log "not installed here, downloading too: ${extra[*]}"
  fetch "${extra[@]}"
fi

for f in "$DEST"/debs/*.deb; do dpkg -x "$f" "$DEST/root"; done
[ -f "$LIBDIR/libvulkan_lvp.so" ] || die "no libvulkan_lvp.so in the extracted packages ($LIBDIR)"
SRC_ICD="$DEST/root/usr/share/vulkan/icd.d/lvp_icd.json"
[ -f "$SRC_ICD" ] || SRC_ICD=$(ls "$DEST"/root/usr/share/vulkan/icd.d/lvp_icd*.json 2>/dev/null | head -n 1)
[ -n "$SRC_ICD" ] && [ -f "$SRC_ICD" ] || die "no lvp_icd json in the extracted packages"

# Every library the driver needs must resolve, with the private folder first.
missing=$(LD_LIBRARY_PATH="$LIBDIR" ldd -r "$LIBDIR/libvulkan_lvp.so" 2>&1 | grep -E 'not found|undefined symbol' || true)
[ -z "$missing" ] || die "libvulkan_lvp.so does not resolve: $(echo "$missing" | tr '\n' ';')"

api=$(sed -n 's/.*"api_version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$SRC_ICD" | head -n 1)
[ -n "$api" ] || api=1.4.305
cat > "$DEST/lvp_icd.json" <<EOF
{
    "ICD": {
        "api_version": "$api",
        "library_path": "$LIBDIR/libvulkan_lvp.so"
    },
    "file_format_version": "1.0.0"
}
EOF
cat > "$DEST/env.sh" <<EOF
export VK_ICD_FILENAMES="$DEST/lvp_icd.json"
export LD_LIBRARY_PATH="$LIBDIR\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
EOF
rm -rf "$APT/cache" "$APT/lists" "$DEST/debs"
echo "$MESA_UPSTREAM" > "$STAMP"
log "lavapipe $MESA_UPSTREAM (Vulkan $api) is in $DEST"
print_env
