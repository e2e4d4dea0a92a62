#!/usr/bin/env bash
# Installs (idempotently) a real, seeded WordPress test site for kbframework's WordPress connector
# and serves it with PHP's built-in web server.
#
#   tests/wordpress/setup_wp.sh [PORT]        # default port 8089
#
# Environment (all optional):
#   WP_STATE_FILE        where the JSON state is written (default /tmp/kbf-wp-state.json)
#   KBF_WP_HOST          address to bind/advertise (default 127.0.0.1)
#   KBF_WP_DB_NAME       database, DROPPED and recreated on every run
#                        (default kbf_wp_test on port 8089, kbf_wp_test_<PORT> on other ports)
#   KBF_WP_DB_USER / KBF_WP_DB_PASSWORD   DB user created for WordPress (kbf_wp / kbf_wp_pass)
#   KBF_WP_DB_HOST       host[:port] WordPress connects to (default 127.0.0.1:3306)
#   KBF_WP_MYSQL         admin client command (default "mysql -uroot"; socket, or -h127.0.0.1)
#   KBF_WP_CONTENT_DIR   our WP_CONTENT_DIR (default /var/lib/kbf-wp/<PORT>/wp-content; uploads wiped per run)
#   KBF_WP_WORKERS       PHP_CLI_SERVER_WORKERS for php -S (default 4)
#   KBF_WP_BULK          if set to N > 0, also create N bulk posts (bulk_seed.php)
#
# Requires root (apt-get, /etc/wordpress, /var/lib).
set -euo pipefail

PORT="${1:-${KBF_WP_PORT:-8089}}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HOST="${KBF_WP_HOST:-127.0.0.1}"
BASE_URL="http://${HOST}:${PORT}"
STATE_FILE="${WP_STATE_FILE:-/tmp/kbf-wp-state.json}"
if [[ "$PORT" == 8089 ]]; then DB_NAME="${KBF_WP_DB_NAME:-kbf_wp_test}"; else DB_NAME="${KBF_WP_DB_NAME:-kbf_wp_test_${PORT}}"; fi
DB_USER="${KBF_WP_DB_USER:-kbf_wp}"
DB_PASSWORD="${KBF_WP_DB_PASSWORD:-kbf_wp_pass}"
DB_HOST="${KBF_WP_DB_HOST:-127.0.0.1:3306}"
MYSQL="${KBF_WP_MYSQL:-mysql -uroot}"
CONTENT_DIR="${KBF_WP_CONTENT_DIR:-/var/lib/kbf-wp/${PORT}/wp-content}"
WORKERS="${KBF_WP_WORKERS:-4}"
WP_CORE=/usr/share/wordpress
RUN_DIR="${KBF_WP_RUN_DIR:-/tmp}"
PID_FILE="${RUN_DIR}/kbf-wp-${PORT}.pid"
LOG_FILE="${RUN_DIR}/kbf-wp-${PORT}.log"

log() { printf '[setup_wp %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ "$PORT" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$PORT'"
[[ "$DB_NAME" =~ ^[A-Za-z0-9_]+$ ]] || die "bad KBF_WP_DB_NAME"
[[ $EUID -eq 0 ]] || die "must run as root"
T0=$SECONDS

# 1. Packages ----------------------------------------------------------------------------------
PKGS=(wordpress php-cli php-mysql php-xml php-mbstring)  # php-xml: /wp-sitemap.xml needs SimpleXML
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q "${PKGS[@]}" >&2; then
        log "apt-get install failed; running apt-get update and retrying"
        apt-get update -q >&2
        apt-get install -y -q "${PKGS[@]}" >&2
    fi
fi
[[ -f "$WP_CORE/wp-load.php" ]] || die "$WP_CORE/wp-load.php missing after install"
command -v php >/dev/null || die "php not found"
php -r 'exit(extension_loaded("mysqli") ? 0 : 1);' || die "php mysqli extension missing (php-mysql)"

# 2. Stop a server we started earlier on this port ------------------------------------------------
"$HERE/stop_wp.sh" "$PORT" >/dev/null 2>&1 || true
if (exec 3<>"/dev/tcp/${HOST}/${PORT}") 2>/dev/null; then
    die "port ${PORT} on ${HOST} is in use by another process (not ours: no ${PID_FILE})"
fi

# 3. Database -------------------------------------------------------------------------------------
log "recreating database ${DB_NAME}"
$MYSQL <<SQL || die "MariaDB not reachable with '$MYSQL'"
DROP DATABASE IF EXISTS \`${DB_NAME}\`;
CREATE DATABASE \`${DB_NAME}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS '${DB_USER}'@'localhost' IDENTIFIED BY '${DB_PASSWORD}';
CREATE USER IF NOT EXISTS '${DB_USER}'@'127.0.0.1' IDENTIFIED BY '${DB_PASSWORD}';
ALTER USER '${DB_USER}'@'localhost' IDENTIFIED BY '${DB_PASSWORD}';
ALTER USER '${DB_USER}'@'127.0.0.1' IDENTIFIED BY '${DB_PASSWORD}';
GRANT ALL PRIVILEGES ON \`${DB_NAME}\`.* TO '${DB_USER}'@'localhost';
GRANT ALL PRIVILEGES ON \`${DB_NAME}\`.* TO '${DB_USER}'@'127.0.0.1';
FLUSH PRIVILEGES;
SQL

# 4. wp-content of our own (Debian's default is /var/lib/wordpress/wp-content) ---------------------
log "preparing ${CONTENT_DIR}"
mkdir -p "$CONTENT_DIR"/{mu-plugins,plugins,languages}
rm -rf "$CONTENT_DIR/uploads" "$CONTENT_DIR/debug.log" "$CONTENT_DIR/upgrade" "$CONTENT_DIR/cache"
mkdir -p "$CONTENT_DIR/uploads"
ln -sfn "$WP_CORE/wp-content/themes" "$CONTENT_DIR/themes"   # the REST API needs no theme; the frontend does
install -m 0644 "$HERE/kbf-test-mu-plugin.php" "$CONTENT_DIR/mu-plugins/kbf-test-mu-plugin.php"
[[ -f "$CONTENT_DIR/index.php" ]] || echo '<?php // Silence is golden.' > "$CONTENT_DIR/index.php"

# 5. Config. Debian's /usr/share/wordpress/wp-config.php includes /etc/wordpress/config-<host>.php
#    (host from HTTP_HOST, port stripped). Ours dispatch on the port to kbf-wp-port-<PORT>.php,
#    so several test sites (one per port, each with its own DB) can run side by side.
salt() { php -r 'echo bin2hex(random_bytes(32));'; }
mkdir -p /etc/wordpress
PORT_CONFIG="/etc/wordpress/kbf-wp-port-${PORT}.php"
CONFIG_TMP="$(mktemp)"
cat >"$CONFIG_TMP" <<PHP
<?php
/* Written by kbframework tests/wordpress/setup_wp.sh for the test site on port ${PORT}. */
define('DB_NAME', '${DB_NAME}');
define('DB_USER', '${DB_USER}');
define('DB_PASSWORD', '${DB_PASSWORD}');
define('DB_HOST', '${DB_HOST}');
define('DB_CHARSET', 'utf8mb4');
define('DB_COLLATE', '');
define('WP_CONTENT_DIR', '${CONTENT_DIR}');
define('WP_ENVIRONMENT_TYPE', 'local');   /* application passwords over plain http */
define('DISABLE_WP_CRON', true);          /* no loopback cron requests from php -S */
define('AUTOMATIC_UPDATER_DISABLED', true);
define('WP_HTTP_BLOCK_EXTERNAL', true);   /* no network: never wait on api.wordpress.org */
define('WP_DEBUG', true);
define('WP_DEBUG_DISPLAY', false);        /* keep notices out of JSON responses */
define('WP_DEBUG_LOG', '${CONTENT_DIR}/debug.log');
@ini_set('display_errors', '0');
define('FS_METHOD', 'direct');
define('AUTH_KEY', '$(salt)');
define('SECURE_AUTH_KEY', '$(salt)');
define('LOGGED_IN_KEY', '$(salt)');
define('NONCE_KEY', '$(salt)');
define('AUTH_SALT', '$(salt)');
define('SECURE_AUTH_SALT', '$(salt)');
define('LOGGED_IN_SALT', '$(salt)');
define('NONCE_SALT', '$(salt)');
\$table_prefix = 'wp_';
PHP
install -m 0644 "$CONFIG_TMP" "${PORT_CONFIG}.tmp$$" && mv -f "${PORT_CONFIG}.tmp$$" "$PORT_CONFIG"
cat >"$CONFIG_TMP" <<'PHP'
<?php
/* Written by kbframework tests/wordpress/setup_wp.sh: pick the test site's config by port. */
$kbf_wp_port = preg_match('/:(\d+)$/', $_SERVER['HTTP_HOST'] ?? '', $kbf_wp_m) ? $kbf_wp_m[1] : '80';
$kbf_wp_cfg = '/etc/wordpress/kbf-wp-port-' . $kbf_wp_port . '.php';
if (!is_file($kbf_wp_cfg)) {
    header('HTTP/1.0 404 Not Found');
    echo 'No kbframework WordPress test site configured for port ' . htmlspecialchars($kbf_wp_port) . "\n";
    exit(1);
}
require $kbf_wp_cfg;
unset($kbf_wp_port, $kbf_wp_m, $kbf_wp_cfg);
PHP
chmod 0644 "$CONFIG_TMP"
for h in 127.0.0.1 localhost "$HOST"; do
    # atomic replace: parallel setups on other ports may be reading/writing the same file
    target="/etc/wordpress/config-${h}.php"
    cmp -s "$CONFIG_TMP" "$target" || { cp "$CONFIG_TMP" "${target}.tmp$$" && mv -f "${target}.tmp$$" "$target"; }
done
rm -f "$CONFIG_TMP"

# 6. Install + seed -------------------------------------------------------------------------------
export KBF_WP_URL="$BASE_URL" WP_STATE_FILE="$STATE_FILE" KBF_WP_ABSPATH="$WP_CORE"
rm -f "$STATE_FILE"
log "wp_install() -> ${BASE_URL}"
php "$HERE/install.php" >&2
log "seeding content"
php "$HERE/seed.php" >&2
if [[ "${KBF_WP_BULK:-0}" =~ ^[1-9][0-9]*$ ]]; then
    log "bulk seeding ${KBF_WP_BULK} posts"
    php "$HERE/bulk_seed.php" "$KBF_WP_BULK" >&2
fi

# 7. Serve ----------------------------------------------------------------------------------------
log "starting php -S ${HOST}:${PORT} (${WORKERS} workers), log ${LOG_FILE}"
mkdir -p "$RUN_DIR"
: >"$LOG_FILE"
# setsid: own session/process group (the workers are its children); stop_wp.sh kills the group.
PHP_CLI_SERVER_WORKERS="$WORKERS" KBF_WP_CONTENT_DIR="$CONTENT_DIR" \
    setsid bash -c 'echo $$ >"$1"; exec php -d display_errors=stderr -S "$2" -t "$3" "$4"' \
    kbf-wp "$PID_FILE" "${HOST}:${PORT}" "$WP_CORE" "$HERE/router.php" \
    </dev/null >>"$LOG_FILE" 2>&1 &

ok=0
for _ in $(seq 1 100); do
    if curl -fsS -o /dev/null --max-time 5 "${BASE_URL}/wp-json/" 2>/dev/null; then ok=1; break; fi
    sleep 0.1
done
((ok)) || { tail -n 30 "$LOG_FILE" >&2; die "${BASE_URL}/wp-json/ did not answer"; }
# Warm up: the first request regenerates the rewrite rules (including the `event` post type's).
curl -fsS -o /dev/null --max-time 10 "${BASE_URL}/wp-json/wp/v2/event?per_page=1" \
    || die "${BASE_URL}/wp-json/wp/v2/event failed"

log "ready in $((SECONDS - T0))s: ${BASE_URL}/wp-json/  (pid $(cat "$PID_FILE"), state ${STATE_FILE})"
echo "$STATE_FILE"
