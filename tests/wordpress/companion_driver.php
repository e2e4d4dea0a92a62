<?php
/**
 * CLI driver for the kbframework Connect plugin tests (tests/test_wordpress_companion.py):
 * runs the plugin's queue on demand and fires WooCommerce's hooks without WooCommerce.
 *
 *   KBF_WP_URL=http://127.0.0.1:8100 php companion_driver.php <command> [args]
 *
 * Commands (each prints one JSON document):
 *   run-queue [--all]          deliver due notices (or every queued one, as if time had passed)
 *   pending                    queued deliveries: [{"ts", "in", "job"}]
 *   woo <hook> <post_id>       do_action(<hook>, …) with a stand-in WC_Product for <post_id>
 *   fake-action-scheduler <post_id>  with stand-in as_* functions: update the post, report the calls
 *   untrash <post_id>          restore from the trash to the previous status
 *   time-saves <post_id> <n>   time the plugin's own work during n saves (ms per save)
 *   options                    the plugin's options and transients still in the database
 *   app-passwords <user_id>    names and uuids of the user's application passwords
 *   get-connection             the stored connection (for the test only: includes the secret)
 *   forget-connection          drop the connection locally (no platform call)
 *   uninstall                  delete the plugin as "Plugins → Delete" does (runs uninstall.php)
 * Set KBFC_NO_KICK=1 to keep the save from starting the runner itself.
 */

require __DIR__ . '/_bootstrap.php';
require_once ABSPATH . 'wp-admin/includes/plugin.php';
require_once ABSPATH . 'wp-admin/includes/file.php';

if (getenv('KBFC_NO_KICK')) {
    add_filter('kbfc_kick_runner', '__return_false');
}

/** Stand-in for WC_Product / WC_Product_Variation: the methods the plugin calls. */
class KBFC_Fake_Product
{
    private $id;
    public function __construct(int $id) { $this->id = $id; }
    public function get_id() { return $this->id; }
    public function get_parent_id() { return (int) wp_get_post_parent_id($this->id); }
    public function is_type($t) { return $t === 'variation' && get_post_type($this->id) === 'product_variation'; }
}

function kbfc_out($data): void
{
    echo wp_json_encode($data, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES) . "\n";
}

$cmd = $argv[1] ?? '';
$arg = $argv[2] ?? '';
if (!function_exists('kbfc_connection') && !in_array($cmd, ['options', 'app-passwords'], true)) {
    kbf_fail('the kbframework Connect plugin is not active');
}
wp_set_current_user(1);

switch ($cmd) {
    case 'run-queue':
        kbfc_out(['ran' => kbfc_run_queue($arg === '--all'), 'last' => get_option(KBFC_OPTION_LAST_DELIVERY)]);
        break;
    case 'pending':
        kbfc_out(array_map(function ($p) {
            return ['ts' => $p[0], 'in' => $p[0] - time(), 'job' => $p[1]];
        }, kbfc_pending()));
        break;
    case 'woo':
        $id = (int) ($argv[3] ?? 0);
        $hook = $arg;
        if ($hook === 'woocommerce_update_product') {
            do_action($hook, $id, new KBFC_Fake_Product($id));
        } else {
            do_action($hook, new KBFC_Fake_Product($id));
        }
        kbfc_out(['fired' => $hook, 'pending' => count(kbfc_pending())]);
        break;
    case 'fake-action-scheduler':
        $GLOBALS['kbfc_as_calls'] = [];
        function as_enqueue_async_action($hook, $args = [], $group = '') { $GLOBALS['kbfc_as_calls'][] = ['as_enqueue_async_action', $hook, $args, $group]; return 1; }
        function as_schedule_single_action($ts, $hook, $args = [], $group = '') { $GLOBALS['kbfc_as_calls'][] = ['as_schedule_single_action', $hook, $args, $group, $ts - time()]; return 2; }
        $before = count(kbfc_pending());
        do_action('woocommerce_product_set_stock', new KBFC_Fake_Product((int) $arg));
        // a failed delivery's retry goes to Action Scheduler too
        kbfc_schedule(['post_id' => (int) $arg, 'post_type' => 'product', 'event' => 'stock', 'parent_id' => 0, 'queued_at' => microtime(true), 'attempt' => 1], kbfc_retry_delays()[1]);
        kbfc_out(['calls' => $GLOBALS['kbfc_as_calls'], 'wp_cron_added' => count(kbfc_pending()) - $before]);
        break;
    case 'untrash':
        add_filter('wp_untrash_post_status', 'wp_untrash_post_set_previous_status', 10, 3);
        kbfc_out(['restored' => (bool) wp_untrash_post((int) $arg)]);
        break;
    case 'time-saves':
        // The plugin's own work in a save: its transition_post_status callback (timed by a
        // wrapper in its place) and the runner kick it does at shutdown (timed separately).
        $n = (int) ($argv[3] ?? 100);
        remove_action('transition_post_status', 'kbfc_on_transition', 10);
        $ms = [];
        add_action('transition_post_status', function ($new, $old, $post) use (&$ms) {
            $s = hrtime(true);
            kbfc_on_transition($new, $old, $post);
            $ms[] = (hrtime(true) - $s) / 1e6;
        }, 10, 3);
        $total = [];
        $kick = [];
        for ($i = 0; $i < $n; $i++) {
            $GLOBALS['kbfc_queued'] = [];
            $s = hrtime(true);
            wp_update_post(['ID' => (int) $arg, 'post_content' => "timed save {$i} " . microtime(true)]);
            $total[] = (hrtime(true) - $s) / 1e6;
            $s = hrtime(true);
            kbfc_kick_runner();
            $kick[] = (hrtime(true) - $s) / 1e6;
        }
        kbfc_out(['plugin_ms' => $ms, 'save_ms' => $total, 'kick_ms' => $kick]);
        break;
    case 'options':
        global $wpdb;
        kbfc_out($wpdb->get_col("SELECT option_name FROM {$wpdb->options} WHERE option_name LIKE 'kbfc%' OR option_name LIKE '_transient_kbfc%' OR option_name LIKE '_transient_timeout_kbfc%'"));
        break;
    case 'app-passwords':
        kbfc_out(array_map(function ($p) {
            return ['name' => $p['name'], 'uuid' => $p['uuid']];
        }, WP_Application_Passwords::get_user_application_passwords((int) $arg)));
        break;
    case 'get-connection':
        kbfc_out(kbfc_connection());
        break;
    case 'forget-connection':
        $c = kbfc_connection();
        if ($c && !empty($c['app_password_uuid'])) {
            WP_Application_Passwords::delete_application_password((int) $c['app_user_id'], $c['app_password_uuid']);
        }
        delete_option(KBFC_OPTION_CONNECTION);
        kbfc_clear_queue();
        kbfc_out(['forgotten' => (bool) $c]);
        break;
    case 'uninstall':
        deactivate_plugins(['kbframework-connect/kbframework-connect.php']);
        $result = delete_plugins(['kbframework-connect/kbframework-connect.php']);
        kbfc_out(['deleted' => $result === true, 'error' => is_wp_error($result) ? $result->get_error_message() : null]);
        break;
    default:
        kbf_fail("unknown command '{$cmd}'");
}
