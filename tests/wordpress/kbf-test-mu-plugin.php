<?php
/**
 * Plugin Name: kbframework test fixtures
 * Description: Custom post type `event`, REST-visible event meta and an ACF-shaped `acf` REST field,
 *              used by kbframework's WordPress connector tests. Installed as a must-use plugin by
 *              tests/wordpress/setup_wp.sh. Do not use on a real site.
 */

if (!defined('ABSPATH')) {
    exit;
}

/** Meta keys of the `event` post type (all exposed in REST `meta` and in `acf`). */
function kbf_test_event_meta_keys(): array
{
    return ['event_date', 'event_end', 'venue_name', 'city', 'ticket_url', 'price', 'genre'];
}

/** Meta keys exposed through the `acf` field for posts and pages. */
function kbf_test_post_meta_keys(): array
{
    return ['subtitle'];
}

add_action('init', function () {
    register_post_type('event', [
        'labels' => [
            'name' => 'Events',
            'singular_name' => 'Event',
        ],
        'public' => true,
        'has_archive' => true,
        'show_in_rest' => true,
        'rest_base' => 'event',
        'rewrite' => ['slug' => 'events'],
        'menu_icon' => 'dashicons-calendar',
        'supports' => ['title', 'editor', 'thumbnail', 'custom-fields', 'excerpt', 'revisions', 'author'],
    ]);

    foreach (kbf_test_event_meta_keys() as $key) {
        register_post_meta('event', $key, [
            'type' => $key === 'price' ? 'number' : 'string',
            'single' => true,
            'show_in_rest' => true,
            'description' => "Event field {$key}",
        ]);
    }

    foreach (['post', 'page'] as $type) {
        foreach (kbf_test_post_meta_keys() as $key) {
            register_post_meta($type, $key, [
                'type' => 'string',
                'single' => true,
                'show_in_rest' => true,
            ]);
        }
    }
});

/**
 * `acf` REST field shaped like Advanced Custom Fields' REST output:
 * an object of field name => raw stored value (strings), or an empty
 * JSON array `[]` when the post has no fields (which is what ACF returns).
 */
add_action('rest_api_init', function () {
    register_rest_field(['post', 'page', 'event'], 'acf', [
        'get_callback' => function (array $obj) {
            $post_id = (int) $obj['id'];
            $keys = get_post_type($post_id) === 'event'
                ? kbf_test_event_meta_keys()
                : kbf_test_post_meta_keys();
            $out = [];
            foreach ($keys as $key) {
                if (metadata_exists('post', $post_id, $key)) {
                    $out[$key] = (string) get_post_meta($post_id, $key, true);
                }
            }
            return $out ? $out : [];
        },
        'update_callback' => function ($value, WP_Post $post) {
            if (!is_array($value)) {
                return new WP_Error('kbf_acf_invalid', 'acf must be an object', ['status' => 400]);
            }
            $keys = $post->post_type === 'event' ? kbf_test_event_meta_keys() : kbf_test_post_meta_keys();
            foreach ($value as $key => $v) {
                if (in_array($key, $keys, true)) {
                    update_post_meta($post->ID, $key, is_scalar($v) ? (string) $v : '');
                }
            }
            return true;
        },
        'schema' => [
            'description' => 'ACF-shaped custom fields (kbframework test fixture).',
            'type' => ['object', 'array'],
            'context' => ['view', 'edit', 'embed'],
        ],
    ]);
});

/* The test site has no mail transport: never try to send mail (wp_install, new users, ...). */
add_filter('pre_wp_mail', '__return_false');
