<?php
/**
 * Plugin Name:       kbframework Connect
 * Plugin URI:        https://github.com/kbframework/kbframework
 * Description:       Connects this site to a kbframework assistant in one step: paste a connect code, show the chat widget on every page without code, and push every publish, edit, trash and stock change to the assistant within seconds.
 * Version:           0.1.0
 * Requires at least: 6.1
 * Requires PHP:      7.4
 * Author:            kbframework
 * License:           GPL-2.0-or-later
 * License URI:       https://www.gnu.org/licenses/gpl-2.0.html
 * Text Domain:       kbframework-connect
 */

if (!defined('ABSPATH')) {
    exit;
}

define('KBFC_VERSION', '0.1.0');
define('KBFC_FILE', __FILE__);
define('KBFC_DIR', __DIR__);
define('KBFC_MIN_PHP', '7.4');
define('KBFC_MIN_WP', '6.1');
/** Options this plugin owns (uninstall.php deletes exactly these). */
define('KBFC_OPTION_CONNECTION', 'kbfc_connection');
define('KBFC_OPTION_WIDGET', 'kbfc_widget');
define('KBFC_OPTION_LAST_DELIVERY', 'kbfc_last_delivery');
define('KBFC_OPTION_STATS', 'kbfc_stats');
define('KBFC_OPTION_LOCK', 'kbfc_queue_lock');
/** The queued delivery of one notice (WP-Cron event or Action Scheduler action). */
define('KBFC_HOOK', 'kbfc_deliver_notice');
define('KBFC_GROUP', 'kbframework-connect');
/** The WP-Cron event that runs the plugin's own queue (when Action Scheduler is absent). */
define('KBFC_TRIGGER', 'kbfc_run_queue_event');

require_once KBFC_DIR . '/includes/requirements.php';
require_once KBFC_DIR . '/includes/connection.php';
require_once KBFC_DIR . '/includes/notices.php';
require_once KBFC_DIR . '/includes/widget.php';
if (is_admin()) {
    require_once KBFC_DIR . '/includes/settings-page.php';
}

register_activation_hook(__FILE__, 'kbfc_activate');
register_deactivation_hook(__FILE__, 'kbfc_deactivate');
