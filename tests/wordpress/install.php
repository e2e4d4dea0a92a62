<?php
/**
 * Installs WordPress into an EMPTY database without wp-cli (wp_install()), sets pretty permalinks,
 * the site timezone, and creates application passwords. Writes the base of the state file.
 *
 * Run by setup_wp.sh:  KBF_WP_URL=http://127.0.0.1:8089 WP_STATE_FILE=/tmp/kbf-wp-state.json php install.php
 *
 * Optional env: KBF_WP_ADMIN_USER (admin), KBF_WP_ADMIN_PASSWORD (kbf-admin-pass),
 *               KBF_WP_ADMIN_EMAIL (admin@example.com), KBF_WP_TIMEZONE (Europe/Belgrade)
 */

define('WP_INSTALLING', true);
require __DIR__ . '/_bootstrap.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';

$admin_user = getenv('KBF_WP_ADMIN_USER') ?: 'admin';
$admin_pass = getenv('KBF_WP_ADMIN_PASSWORD') ?: 'kbf-admin-pass';
$admin_email = getenv('KBF_WP_ADMIN_EMAIL') ?: 'admin@example.com';
$timezone = getenv('KBF_WP_TIMEZONE') ?: 'Europe/Belgrade';

if (is_blog_installed()) {
    kbf_fail('WordPress is already installed in ' . DB_NAME . ' (setup_wp.sh drops the database first)', 2);
}

$result = wp_install('kbframework WP test site', $admin_user, $admin_email, true, '', wp_slash($admin_pass), 'en_US');
if (is_wp_error($result)) {
    kbf_fail('wp_install failed: ' . $result->get_error_message());
}

// wp_install() guesses the URL from $_SERVER; pin it.
update_option('siteurl', $kbf_url);
update_option('home', $kbf_url);
update_option('blogdescription', 'Fixture site for the kbframework WordPress connector');
update_option('timezone_string', $timezone);
update_option('gmt_offset', '');
update_option('date_format', 'Y-m-d');
update_option('time_format', 'H:i');
update_option('posts_per_page', 10);
update_option('default_comment_status', 'closed');

// Pretty permalinks, so that /wp-json/... and /%postname%/ work (router.php sends unknown paths to index.php).
global $wp_rewrite;
$wp_rewrite->set_permalink_structure('/%postname%/');
// Rules are regenerated lazily on the first web request, when the `event` post type
// registers its rewrite rules under the new structure.
delete_option('rewrite_rules');

$admin = get_user_by('login', $admin_user);
if (!$admin) {
    kbf_fail('admin user missing after install');
}
update_user_meta($admin->ID, 'show_welcome_panel', 0);
wp_update_user(['ID' => $admin->ID, 'display_name' => 'KBF Admin', 'first_name' => 'KBF', 'last_name' => 'Admin']);

$created = WP_Application_Passwords::create_new_application_password($admin->ID, ['name' => 'kbf-tests']);
if (is_wp_error($created)) {
    kbf_fail('application password: ' . $created->get_error_message());
}
[$app_password, $app_item] = $created;

// A low-privilege user (can read published content only) with its own application password.
$viewer_id = wp_insert_user([
    'user_login' => 'viewer',
    'user_pass' => 'kbf-viewer-pass',
    'user_email' => 'viewer@example.com',
    'role' => 'subscriber',
    'display_name' => 'KBF Viewer',
]);
if (is_wp_error($viewer_id)) {
    kbf_fail('viewer user: ' . $viewer_id->get_error_message());
}
$viewer_created = WP_Application_Passwords::create_new_application_password($viewer_id, ['name' => 'kbf-tests']);
if (is_wp_error($viewer_created)) {
    kbf_fail('viewer application password: ' . $viewer_created->get_error_message());
}

$state = [
    'base_url' => $kbf_url,
    'rest_url' => $kbf_url . '/wp-json/',
    'port' => (int) (parse_url($kbf_url, PHP_URL_PORT) ?: 80),
    'user' => $admin_user,
    'app_password' => $app_password,
    'app_password_uuid' => $app_item['uuid'],
    'admin_user_id' => $admin->ID,
    'admin_password' => $admin_pass,
    'admin_email' => $admin_email,
    'viewer' => [
        'user' => 'viewer',
        'user_id' => $viewer_id,
        'password' => 'kbf-viewer-pass',
        'app_password' => $viewer_created[0],
    ],
    'timezone' => $timezone,
    'wp_version' => get_bloginfo('version'),
    'db_name' => DB_NAME,
    'content_dir' => WP_CONTENT_DIR,
    'installed_at' => gmdate('Y-m-d\TH:i:s\Z'),
];
kbf_write_state($state);
echo "installed WordPress {$state['wp_version']} at {$kbf_url} (admin user id {$admin->ID})\n";
