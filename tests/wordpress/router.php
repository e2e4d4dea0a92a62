<?php
/**
 * Router for PHP's built-in web server serving Debian's WordPress:
 *
 *   KBF_WP_CONTENT_DIR=/var/lib/kbf-wp/8089/wp-content PHP_CLI_SERVER_WORKERS=4 \
 *     php -S 127.0.0.1:8089 -t /usr/share/wordpress /path/to/router.php
 *
 * - /wp-content/... is served from KBF_WP_CONTENT_DIR (Debian keeps WP_CONTENT_DIR outside the
 *   document root; Apache gets an Alias for it, php -S needs this).
 * - existing files under the document root are served as usual (.php files are executed);
 * - every other path (pretty permalinks, /wp-json/...) goes to index.php.
 *
 * Everything runs at file scope on purpose: WordPress must be loaded in the global scope.
 */

$kbf_root = rtrim($_SERVER['DOCUMENT_ROOT'], '/');
$kbf_path = '/' . ltrim(rawurldecode((string) parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH)), '/');

if (strpos($kbf_path, '..') !== false) {
    http_response_code(400);
    exit;
}

if (strncmp($kbf_path, '/wp-content/', 12) === 0) {
    $kbf_content_dir = rtrim(getenv('KBF_WP_CONTENT_DIR') ?: '/var/lib/kbf-wp/' . $_SERVER['SERVER_PORT'] . '/wp-content', '/');
    $kbf_file = $kbf_content_dir . substr($kbf_path, strlen('/wp-content'));
    if (is_file($kbf_file) && !preg_match('/\.php\d?$/i', $kbf_file)) {
        $kbf_types = [
            'png' => 'image/png', 'jpg' => 'image/jpeg', 'jpeg' => 'image/jpeg', 'gif' => 'image/gif',
            'webp' => 'image/webp', 'svg' => 'image/svg+xml', 'css' => 'text/css', 'js' => 'application/javascript',
            'json' => 'application/json', 'txt' => 'text/plain', 'pdf' => 'application/pdf', 'woff2' => 'font/woff2',
        ];
        $kbf_ext = strtolower(pathinfo($kbf_file, PATHINFO_EXTENSION));
        header('Content-Type: ' . ($kbf_types[$kbf_ext] ?? 'application/octet-stream'));
        header('Content-Length: ' . filesize($kbf_file));
        header('Last-Modified: ' . gmdate('D, d M Y H:i:s', filemtime($kbf_file)) . ' GMT');
        if ($_SERVER['REQUEST_METHOD'] !== 'HEAD') {
            readfile($kbf_file);
        }
        exit;
    }
    // Not a static file in our content dir: fall through (WordPress answers 404).
}

if ($kbf_path !== '/' && file_exists($kbf_root . $kbf_path)) {
    if (is_dir($kbf_root . $kbf_path)) {
        if (substr($kbf_path, -1) !== '/') {
            header('Location: ' . $kbf_path . '/', true, 301);
            exit;
        }
        if (is_file($kbf_root . $kbf_path . 'index.php')) {
            $_SERVER['SCRIPT_NAME'] = $_SERVER['PHP_SELF'] = $kbf_path . 'index.php';
            $_SERVER['SCRIPT_FILENAME'] = $kbf_root . $kbf_path . 'index.php';
            chdir($kbf_root . $kbf_path);
            require $kbf_root . $kbf_path . 'index.php';
            return;
        }
        return false;
    }
    return false;  // static file or .php script: let the built-in server handle it
}

// Front controller.
$_SERVER['SCRIPT_NAME'] = '/index.php';
$_SERVER['PHP_SELF'] = '/index.php';
$_SERVER['SCRIPT_FILENAME'] = $kbf_root . '/index.php';
chdir($kbf_root);
require $kbf_root . '/index.php';
