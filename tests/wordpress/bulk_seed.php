<?php
/**
 * Creates N simple published posts quickly (for benchmarks), in category "Bulk", and records them
 * in the state file under "bulk".
 *
 *   KBF_WP_URL=http://127.0.0.1:8089 WP_STATE_FILE=/tmp/kbf-wp-state.json php bulk_seed.php 1000
 *
 * Safe to run while php -S is serving the site. Running it twice adds another N posts.
 */

require __DIR__ . '/_bootstrap.php';

$n = (int) ($argv[1] ?? 0);
if ($n <= 0) {
    kbf_fail('usage: php bulk_seed.php N');
}
$state = kbf_read_state();
$admin = get_user_by('login', $state['user'] ?? 'admin');
if (!$admin) {
    kbf_fail('admin user not found; run setup_wp.sh first');
}
wp_set_current_user($admin->ID);

$cat = term_exists('Bulk', 'category') ?: wp_insert_term('Bulk', 'category', ['description' => 'Benchmark posts']);
if (is_wp_error($cat)) {
    kbf_fail($cat->get_error_message());
}
$cat_id = (int) $cat['term_id'];

$t0 = microtime(true);
$genres = ['techno', 'jazz', 'house', 'rock', 'classical'];
$cities = ['Belgrade', 'Novi Sad', 'Niš', 'Subotica'];
$start = isset($state['bulk']['count']) ? (int) $state['bulk']['count'] : 0;
$base = new DateTimeImmutable('-400 days', wp_timezone());

global $wpdb;
wp_defer_term_counting(true);
wp_defer_comment_counting(true);
wp_suspend_cache_invalidation(true);
remove_action('do_pings', 'do_all_pings', 10);
$wpdb->query('START TRANSACTION');
$ids = [];
for ($i = $start + 1; $i <= $start + $n; $i++) {
    $g = $genres[$i % count($genres)];
    $c = $cities[$i % count($cities)];
    $id = wp_insert_post([
        'post_title' => sprintf('Bulk post %05d: %s in %s', $i, ucfirst($g), $c),
        'post_name' => sprintf('bulk-post-%05d', $i),
        'post_status' => 'publish',
        'post_author' => $admin->ID,
        'post_category' => [$cat_id],
        'post_date' => $base->modify("+{$i} minutes")->format('Y-m-d H:i:s'),
        'post_content' => sprintf(
            "<h2>%s night #%d</h2>\n<p>Bulk benchmark post number %d about %s music in %s. "
            . "Doors open at 22:00, tickets cost %d EUR.</p>\n<ul><li>Genre: %s</li><li>City: %s</li></ul>",
            ucfirst($g), $i, $i, $g, $c, 10 + $i % 40, $g, $c
        ),
        'comment_status' => 'closed',
        'ping_status' => 'closed',
    ], true);
    if (is_wp_error($id)) {
        $wpdb->query('ROLLBACK');
        kbf_fail('wp_insert_post: ' . $id->get_error_message());
    }
    $ids[] = $id;
}
// Like seed.php: modified = date, so modified_after filters stay meaningful.
$wpdb->query($wpdb->prepare(
    "UPDATE {$wpdb->posts} SET post_modified = post_date, post_modified_gmt = post_date_gmt WHERE ID BETWEEN %d AND %d AND post_type = 'post'",
    min($ids), max($ids)
));
$wpdb->query('COMMIT');
wp_suspend_cache_invalidation(false);
wp_defer_term_counting(false);
wp_defer_comment_counting(false);
wp_cache_flush();

$state = kbf_read_state();  // re-read: keep concurrent changes
$state['bulk'] = [
    'count' => $start + $n,
    'category_id' => $cat_id,
    'first_id' => isset($state['bulk']['first_id']) ? (int) $state['bulk']['first_id'] : min($ids),
    'last_id' => max($ids),
];
if (isset($state['published_counts']['post'])) {
    $state['published_counts']['post'] += $n;
}
kbf_write_state($state);
printf("created %d bulk posts (ids %d..%d) in %.1fs\n", $n, min($ids), max($ids), microtime(true) - $t0);
