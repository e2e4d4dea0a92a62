<?php
/**
 * Changes pushed, never lost: every publish, update, unpublish, trash, untrash and delete of
 * a synced post type, and WooCommerce's product save and stock hooks, queue a small notice
 * ("post N of type T changed"). The save only queues (Action Scheduler when it is present,
 * else WP-Cron) and never waits on the network; delivery signs the notice (HMAC-SHA256 of
 * the raw body) and retries with backoff while the platform is unreachable. The platform
 * re-reads the post through the REST API, so a notice carries no content.
 *
 * Without Action Scheduler, each job is one row of its own in wp_options (`kbfc_q_<due>_<id>`,
 * not autoloaded): an INSERT, so two saves at once can never overwrite each other's job, as
 * they could in WP-Cron's single serialized `cron` option. WP-Cron only holds the trigger
 * (`kbfc_run_queue_event` at the earliest due time) that runs the queue. A request that
 * queued notices also starts the runner right away with a non-blocking loopback request (as
 * WordPress does to spawn WP-Cron), so a change arrives within seconds.
 */

if (!defined('ABSPATH')) {
    exit;
}

/** Seconds to wait before each retry (the last one gives up). Filter: `kbfc_retry_delays`. */
function kbfc_retry_delays(): array
{
    $delays = apply_filters('kbfc_retry_delays', [15, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 43200]);
    return array_values(array_map('intval', (array) $delays));
}

function kbfc_use_action_scheduler(): bool
{
    return (bool) apply_filters('kbfc_use_action_scheduler', function_exists('as_enqueue_async_action') && function_exists('as_schedule_single_action'));
}

/** Post types whose changes the platform wants (what the connected source syncs). */
function kbfc_syncs_type(string $type): bool
{
    $c = kbfc_connection();
    return $c && in_array($type, (array) ($c['post_types'] ?? []), true);
}

/** What a status transition means for a visitor; null when nothing public changed. */
function kbfc_event_for(string $new, string $old): ?string
{
    if ($new === 'publish') {
        if ($old === 'publish') {
            return 'update';
        }
        return $old === 'trash' ? 'untrash' : 'publish';
    }
    if ($old === 'publish') {
        return $new === 'trash' ? 'trash' : 'unpublish';
    }
    return null;
}

function kbfc_on_transition($new, $old, $post): void
{
    if (!($post instanceof WP_Post) || !kbfc_syncs_type($post->post_type)) {
        return;
    }
    if (wp_is_post_revision($post) || wp_is_post_autosave($post)) {
        return;
    }
    $event = kbfc_event_for((string) $new, (string) $old);
    if ($event !== null) {
        kbfc_queue_notice($post->ID, $post->post_type, $event);
    }
}

function kbfc_on_deleted($post_id, $post = null): void
{
    $post = $post instanceof WP_Post ? $post : null;
    $type = $post ? $post->post_type : '';
    if ($post && in_array($type, ['product', 'product_variation'], true)) {
        kbfc_queue_notice((int) $post_id, $type, 'delete', (int) $post->post_parent);
    } elseif ($post && kbfc_syncs_type($type)) {
        kbfc_queue_notice((int) $post_id, $type, 'delete');
    }
}

/** `woocommerce_update_product` ($product_id, $product). */
function kbfc_on_product_saved($product_id, $product = null): void
{
    kbfc_queue_product($product ?: $product_id, 'product_save');
}

/** `woocommerce_product_set_stock` / `woocommerce_variation_set_stock` ($product). */
function kbfc_on_stock($product): void
{
    kbfc_queue_product($product, 'stock');
}

/** A product or variation, given as a WC_Product or an id: a variation names its parent. */
function kbfc_queue_product($product, string $event): void
{
    if (!kbfc_connection()) {
        return;
    }
    $id = (is_object($product) && method_exists($product, 'get_id')) ? (int) $product->get_id() : (int) $product;
    if ($id <= 0) {
        return;
    }
    $type = get_post_type($id) ?: ((is_object($product) && method_exists($product, 'is_type') && $product->is_type('variation')) ? 'product_variation' : 'product');
    $parent = 0;
    if ($type === 'product_variation') {
        $parent = (int) wp_get_post_parent_id($id);
        if (!$parent && is_object($product) && method_exists($product, 'get_parent_id')) {
            $parent = (int) $product->get_parent_id();
        }
    }
    kbfc_queue_notice($id, $type, $event, $parent);
}

/**
 * Queue one notice. Within one request a post is queued once (a WooCommerce save fires
 * several hooks): the delivery reads the post's state when it runs, not when it was queued.
 */
function kbfc_queue_notice(int $post_id, string $type, string $event, int $parent_id = 0): void
{
    global $kbfc_queued;
    if (!kbfc_connection() || $post_id <= 0) {
        return;
    }
    if (!is_array($kbfc_queued)) {
        $kbfc_queued = [];
    }
    if (isset($kbfc_queued[$post_id]) && $event !== 'delete') {
        return;
    }
    $kbfc_queued[$post_id] = $event;
    $job = [
        'post_id' => $post_id,
        'post_type' => $type,
        'event' => $event,
        'parent_id' => $parent_id,
        'queued_at' => microtime(true),
        'attempt' => 0,
    ];
    kbfc_schedule($job, 0);
}

/** Put a delivery job in the queue, to run after $delay seconds. */
function kbfc_schedule(array $job, int $delay): void
{
    if (kbfc_use_action_scheduler()) {
        if ($delay <= 0) {
            as_enqueue_async_action(KBFC_HOOK, [$job], KBFC_GROUP);
        } else {
            as_schedule_single_action(time() + $delay, KBFC_HOOK, [$job], KBFC_GROUP);
        }
        return;
    }
    $due = time() + max(0, $delay);
    add_option(sprintf('kbfc_q_%010d_%s', $due, bin2hex(random_bytes(6))), $job, '', false);
    kbfc_ensure_trigger($due);
    if ($delay <= 0) {
        $GLOBALS['kbfc_kick'] = true;
    }
}

/** A WP-Cron event that runs the queue at or before $due (the cron array is in memory). */
function kbfc_ensure_trigger(int $due): void
{
    foreach ((array) _get_cron_array() as $ts => $hooks) {
        if ($ts > $due) {
            break; // sorted by time
        }
        if (isset($hooks[KBFC_TRIGGER])) {
            return;
        }
    }
    wp_schedule_single_event($due, KBFC_TRIGGER, [$due]);
}

/** Queued jobs (own queue only): [[due, job, option name], ...], oldest first. */
function kbfc_pending(int $limit = 500): array
{
    global $wpdb;
    $rows = $wpdb->get_results($wpdb->prepare(
        "SELECT option_name, option_value FROM {$wpdb->options} WHERE option_name LIKE %s ORDER BY option_name LIMIT %d",
        $wpdb->esc_like('kbfc_q_') . '%',
        $limit
    ));
    $out = [];
    foreach ((array) $rows as $row) {
        $out[] = [(int) substr($row->option_name, 7, 10), maybe_unserialize($row->option_value), $row->option_name];
    }
    return $out;
}

/** Whether a failed delivery is worth retrying: the network, a timeout, rate limits, 5xx. */
function kbfc_should_retry(int $status): bool
{
    return $status === 0 || $status === 408 || $status === 425 || $status === 429 || $status >= 500;
}

/** Deliver one notice (the queue's callback); on a temporary failure, queue the next attempt. */
function kbfc_deliver($job): void
{
    $c = kbfc_connection();
    if (!$c || !is_array($job) || empty($job['post_id'])) {
        return; // disconnected meanwhile: nothing to deliver to
    }
    $post = get_post((int) $job['post_id']);
    $body = [
        'kbf_notice' => 1,
        'post_id' => (int) $job['post_id'],
        'post_type' => $post ? $post->post_type : (string) $job['post_type'],
        'event' => (string) $job['event'],
        'status' => $post ? $post->post_status : 'deleted',
        'modified_gmt' => $post ? $post->post_modified_gmt : null,
        'parent_id' => (int) ($job['parent_id'] ?? 0),
        'attempt' => (int) $job['attempt'] + 1,
        'queued_at' => (float) $job['queued_at'],
    ];
    $started = microtime(true);
    $response = kbfc_signed_post($c['notice_url'], $body, $c['signing_secret'], 10);
    $status = is_wp_error($response) ? 0 : (int) wp_remote_retrieve_response_code($response);
    $ok = $status >= 200 && $status < 300;
    $delays = kbfc_retry_delays();
    $attempt = (int) $job['attempt'];
    $retry_in = (!$ok && kbfc_should_retry($status) && $attempt < count($delays)) ? $delays[$attempt] : null;
    if ($ok) {
        $result = __('delivered', 'kbframework-connect');
        $answer = json_decode((string) wp_remote_retrieve_body($response), true);
        if (is_array($answer) && !empty($answer['stale'])) {
            $result = __('delivered (the platform already had this version)', 'kbframework-connect');
        }
    } else {
        $result = kbfc_response_error($response);
    }
    update_option(KBFC_OPTION_LAST_DELIVERY, [
        'at' => time(),
        'post_id' => (int) $job['post_id'],
        'post_type' => $body['post_type'],
        'event' => $body['event'],
        'status' => $status,
        'ok' => $ok,
        'result' => $result,
        'attempt' => $attempt + 1,
        'ms' => (int) round((microtime(true) - $started) * 1000),
        'retry_at' => $retry_in !== null ? time() + $retry_in : null,
    ], false);
    $stats = get_option(KBFC_OPTION_STATS);
    $stats = is_array($stats) ? $stats : ['delivered' => 0, 'failed' => 0, 'gave_up' => 0];
    $stats[$ok ? 'delivered' : 'failed']++;
    if (!$ok && $retry_in === null) {
        $stats['gave_up']++;
    }
    update_option(KBFC_OPTION_STATS, $stats, false);
    if ($retry_in !== null) {
        $job['attempt'] = $attempt + 1;
        kbfc_schedule($job, $retry_in);
    }
}

/**
 * Run queued deliveries now: the due ones, or all of them ($all, e.g. "Send pending now").
 * One runner at a time (an option used as a lock, taken atomically with add_option). A job
 * is removed only after its delivery was tried (a retry is queued as a new job first), so a
 * runner that dies midway delivers twice rather than never.
 */
function kbfc_run_queue(bool $all = false): int
{
    if (kbfc_use_action_scheduler()) {
        return 0; // Action Scheduler runs its own queue
    }
    $lock = (int) get_option(KBFC_OPTION_LOCK, 0);
    if ($lock && $lock < time() - 120) {
        delete_option(KBFC_OPTION_LOCK); // a runner died holding it
    }
    if (!add_option(KBFC_OPTION_LOCK, time(), '', false)) {
        return 0;
    }
    $n = 0;
    try {
        $deadline = microtime(true) + 45;
        do {
            $batch = kbfc_pending(100);
            $done = 0;
            foreach ($batch as [$due, $job, $name]) {
                if (!$all && $due > time()) {
                    break 2;
                }
                do_action(KBFC_HOOK, $job);
                delete_option($name);
                $n++;
                $done++;
                if (microtime(true) > $deadline) {
                    break 2;
                }
            }
        } while ($done > 0 && !$all);
    } finally {
        delete_option(KBFC_OPTION_LOCK);
    }
    $next = kbfc_pending(1);
    if ($next) {
        kbfc_ensure_trigger((int) $next[0][0]);
    }
    return $n;
}

/** Drop every queued delivery (disconnect, deactivation, uninstall). */
function kbfc_clear_queue(): void
{
    global $wpdb;
    $wpdb->query($wpdb->prepare("DELETE FROM {$wpdb->options} WHERE option_name LIKE %s", $wpdb->esc_like('kbfc_q_') . '%'));
    if (function_exists('wp_unschedule_hook')) {
        wp_unschedule_hook(KBFC_TRIGGER);
        wp_unschedule_hook(KBFC_HOOK);
    }
    if (function_exists('as_unschedule_all_actions')) {
        as_unschedule_all_actions(KBFC_HOOK);
    }
    delete_option(KBFC_OPTION_LOCK);
}

/** The secret that lets the loopback request start the queue runner. */
function kbfc_runner_token(): string
{
    return hash_hmac('sha256', 'kbfc-run-queue', wp_salt('nonce'));
}

/** After the response: if this request queued notices, start the runner (non-blocking). */
function kbfc_kick_runner(): void
{
    if (empty($GLOBALS['kbfc_kick']) || wp_doing_cron() || (defined('KBFC_RUNNING') && KBFC_RUNNING)) {
        return;
    }
    $GLOBALS['kbfc_kick'] = false;
    if (!apply_filters('kbfc_kick_runner', true)) {
        return;
    }
    wp_remote_post(admin_url('admin-ajax.php'), [
        'timeout' => 0.01,
        'blocking' => false,
        'sslverify' => apply_filters('https_local_ssl_verify', false),
        'body' => ['action' => 'kbfc_run_queue', 'token' => kbfc_runner_token()],
    ]);
}

function kbfc_ajax_run_queue(): void
{
    $token = isset($_POST['token']) ? sanitize_text_field(wp_unslash($_POST['token'])) : '';
    if (!hash_equals(kbfc_runner_token(), $token)) {
        wp_die('', '', ['response' => 403]);
    }
    define('KBFC_RUNNING', true);
    ignore_user_abort(true);
    $n = kbfc_run_queue(false);
    wp_die(esc_html((string) $n), '', ['response' => 200]);
}

add_action('transition_post_status', 'kbfc_on_transition', 10, 3);
add_action('deleted_post', 'kbfc_on_deleted', 10, 2);
add_action('woocommerce_update_product', 'kbfc_on_product_saved', 10, 2);
add_action('woocommerce_product_set_stock', 'kbfc_on_stock', 10, 1);
add_action('woocommerce_variation_set_stock', 'kbfc_on_stock', 10, 1);
add_action(KBFC_HOOK, 'kbfc_deliver', 10, 1);
add_action(KBFC_TRIGGER, function () {
    kbfc_run_queue(false);
});
add_action('shutdown', 'kbfc_kick_runner');
add_action('wp_ajax_kbfc_run_queue', 'kbfc_ajax_run_queue');
add_action('wp_ajax_nopriv_kbfc_run_queue', 'kbfc_ajax_run_queue');
