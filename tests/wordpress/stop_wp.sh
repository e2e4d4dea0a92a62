#!/usr/bin/env bash
# Stops the php -S server started by setup_wp.sh on PORT (default 8089). The database, content
# dir and state file are left alone (setup_wp.sh recreates them) unless --purge is given.
#
#   tests/wordpress/stop_wp.sh [PORT] [--purge]
#
# --purge also drops the site's database, deletes /var/lib/kbf-wp/<PORT> and
# /etc/wordpress/kbf-wp-port-<PORT>.php (same KBF_WP_* overrides as setup_wp.sh).
set -uo pipefail

PURGE=0
ARGS=()
for a in "$@"; do
    if [[ "$a" == --purge ]]; then PURGE=1; else ARGS+=("$a"); fi
done
PORT="${ARGS[0]:-${KBF_WP_PORT:-8089}}"
RUN_DIR="${KBF_WP_RUN_DIR:-/tmp}"
PID_FILE="${RUN_DIR}/kbf-wp-${PORT}.pid"

purge() {
    ((PURGE)) || return 0
    local db content
    if [[ "$PORT" == 8089 ]]; then db="${KBF_WP_DB_NAME:-kbf_wp_test}"; else db="${KBF_WP_DB_NAME:-kbf_wp_test_${PORT}}"; fi
    content="${KBF_WP_CONTENT_DIR:-/var/lib/kbf-wp/${PORT}/wp-content}"
    [[ "$db" =~ ^[A-Za-z0-9_]+$ ]] && ${KBF_WP_MYSQL:-mysql -uroot} -e "DROP DATABASE IF EXISTS \`${db}\`"
    rm -rf "$content" "/etc/wordpress/kbf-wp-port-${PORT}.php"
    rmdir "$(dirname "$content")" 2>/dev/null
    echo "purged database ${db} and ${content}" >&2
}
trap purge EXIT

if [[ ! -f "$PID_FILE" ]]; then
    echo "no server recorded for port ${PORT} (${PID_FILE} missing)" >&2
    exit 0
fi
pid="$(cat "$PID_FILE")"
if [[ ! "$pid" =~ ^[0-9]+$ ]]; then
    rm -f "$PID_FILE"
    exit 0
fi

# Only touch the process if it still is our php -S (pids get reused).
if ! tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -q -- "-S .*:${PORT} "; then
    echo "pid ${pid} is not our php -S on port ${PORT}; removing stale ${PID_FILE}" >&2
    rm -f "$PID_FILE"
    exit 0
fi

# setup_wp.sh starts php -S as a session/process-group leader: signal the whole group
# (master + PHP_CLI_SERVER_WORKERS children). Exited processes may stay zombies for a while
# (until init reaps them); they hold no socket, so they count as gone.
group_alive() { ps -o stat= -g "$pid" 2>/dev/null | grep -qv '^Z'; }
kill -TERM -- "-${pid}" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
for _ in $(seq 1 60); do
    group_alive || break
    sleep 0.05
done
if group_alive; then
    kill -KILL -- "-${pid}" 2>/dev/null
    sleep 0.1
fi
rm -f "$PID_FILE"
echo "stopped php -S on port ${PORT} (pid ${pid})" >&2
