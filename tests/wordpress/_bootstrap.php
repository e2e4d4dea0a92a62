<?php
/**
 * Shared CLI bootstrap for install.php / seed.php / bulk_seed.php.
 *
 * Must be included at FILE scope (not inside a function): WordPress relies on
 * globals declared while wp-load.php runs.
 *
 * Environment:
 *   KBF_WP_URL       base URL of the site (default http://127.0.0.1:8089)
 *   WP_STATE_FILE    JSON state file (default /tmp/kbf-wp-state.json)
 *   KBF_WP_ABSPATH   WordPress core dir (default /usr/share/wordpress)
 */

if (PHP_SAPI !== 'cli') {
    http_response_code(403);
    exit(1);
}

$kbf_url = rtrim(getenv('KBF_WP_URL') ?: 'http://127.0.0.1:8089', '/');
$kbf_parts = parse_url($kbf_url);
$kbf_state_file = getenv('WP_STATE_FILE') ?: '/tmp/kbf-wp-state.json';

// Debian's /usr/share/wordpress/wp-config.php picks /etc/wordpress/config-<host>.php from HTTP_HOST.
$_SERVER['HTTP_HOST'] = $kbf_parts['host'] . (isset($kbf_parts['port']) ? ':' . $kbf_parts['port'] : '');
$_SERVER['SERVER_NAME'] = $kbf_parts['host'];
$_SERVER['SERVER_PORT'] = (string) ($kbf_parts['port'] ?? 80);
$_SERVER['REQUEST_URI'] = '/';
$_SERVER['REQUEST_METHOD'] = 'GET';
$_SERVER['SCRIPT_NAME'] = '/index.php';
$_SERVER['PHP_SELF'] = '/index.php';
$_SERVER['REMOTE_ADDR'] = '127.0.0.1';
$_SERVER['SERVER_PROTOCOL'] = 'HTTP/1.1';

function kbf_read_state(): array
{
    global $kbf_state_file;
    if (!is_file($kbf_state_file)) {
        return [];
    }
    $data = json_decode((string) file_get_contents($kbf_state_file), true);
    return is_array($data) ? $data : [];
}

function kbf_write_state(array $state): void
{
    global $kbf_state_file;
    $dir = dirname($kbf_state_file);
    if (!is_dir($dir)) {
        mkdir($dir, 0755, true);
    }
    $tmp = $kbf_state_file . '.tmp' . getmypid();
    file_put_contents($tmp, json_encode($state, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE) . "\n");
    chmod($tmp, 0644);
    rename($tmp, $kbf_state_file);
}

function kbf_fail(string $msg, int $code = 1): void
{
    fwrite(STDERR, "kbf-wp: {$msg}\n");
    exit($code);
}

require_once rtrim(getenv('KBF_WP_ABSPATH') ?: '/usr/share/wordpress', '/') . '/wp-load.php';
