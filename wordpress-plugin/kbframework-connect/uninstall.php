<?php
/**
 * Uninstall: delete the application password this plugin made, tell the platform (best
 * effort), drop queued notices and delete every option and transient the plugin wrote.
 */

if (!defined('WP_UNINSTALL_PLUGIN')) {
    exit;
}

require_once __DIR__ . '/kbframework-connect.php';

kbfc_disconnect();
foreach ([KBFC_OPTION_CONNECTION, KBFC_OPTION_WIDGET, KBFC_OPTION_LAST_DELIVERY, KBFC_OPTION_STATS, KBFC_OPTION_LOCK] as $kbfc_option) {
    delete_option($kbfc_option);
}
delete_transient('kbfc_activated');
global $wpdb;
// per-user settings-page messages
$wpdb->query($wpdb->prepare("DELETE FROM {$wpdb->options} WHERE option_name LIKE %s OR option_name LIKE %s",
    $wpdb->esc_like('_transient_kbfc_') . '%', $wpdb->esc_like('_transient_timeout_kbfc_') . '%'));
