<?php
/**
 * Settings → kbframework: connect with a code, disconnect, the widget switches (Settings
 * API), and the last delivery with its result. Only for users who can manage_options;
 * every form carries a nonce; secrets are shown by their last four characters only.
 */

if (!defined('ABSPATH')) {
    exit;
}

const KBFC_PAGE = 'kbframework-connect';

add_action('admin_menu', function () {
    add_options_page(
        __('kbframework', 'kbframework-connect'),
        __('kbframework', 'kbframework-connect'),
        'manage_options',
        KBFC_PAGE,
        'kbfc_render_settings_page'
    );
});

add_action('admin_init', function () {
    register_setting('kbfc_widget_group', KBFC_OPTION_WIDGET, [
        'type' => 'object',
        'sanitize_callback' => 'kbfc_sanitize_widget',
        'default' => ['enabled' => false, 'placeholder' => true],
        'show_in_rest' => false,
    ]);
});

add_filter('plugin_action_links_' . plugin_basename(KBFC_FILE), function ($links) {
    array_unshift($links, '<a href="' . esc_url(admin_url('options-general.php?page=' . KBFC_PAGE)) . '">' . esc_html__('Settings', 'kbframework-connect') . '</a>');
    return $links;
});

/** Back to the settings page with a message for this user (kept in a short transient). */
function kbfc_redirect_with(string $type, string $message): void
{
    set_transient('kbfc_msg_' . get_current_user_id(), ['type' => $type, 'text' => $message], 120);
    wp_safe_redirect(admin_url('options-general.php?page=' . KBFC_PAGE));
    exit;
}

function kbfc_require_admin(string $action): void
{
    if (!current_user_can('manage_options')) {
        wp_die(esc_html__('You are not allowed to change these settings.', 'kbframework-connect'), '', ['response' => 403]);
    }
    check_admin_referer($action);
}

add_action('admin_post_kbfc_connect', function () {
    kbfc_require_admin('kbfc_connect');
    $code = isset($_POST['kbfc_code']) ? sanitize_text_field(wp_unslash($_POST['kbfc_code'])) : '';
    if ($code === '') {
        kbfc_redirect_with('error', __('Paste the connect code first.', 'kbframework-connect'));
    }
    if (kbfc_connection()) {
        kbfc_redirect_with('error', __('This site is already connected. Disconnect first to connect it elsewhere.', 'kbframework-connect'));
    }
    $result = kbfc_connect($code, get_current_user_id());
    if (is_wp_error($result)) {
        kbfc_redirect_with('error', $result->get_error_message());
    }
    kbfc_redirect_with('success', __('Connected. The assistant is reading the site now; every change from now on reaches it within seconds.', 'kbframework-connect'));
});

add_action('admin_post_kbfc_disconnect', function () {
    kbfc_require_admin('kbfc_disconnect');
    $error = kbfc_disconnect();
    if ($error !== '') {
        /* translators: %s: the platform's error message */
        kbfc_redirect_with('warning', sprintf(__('Disconnected here (application password deleted), but the platform did not confirm: %s', 'kbframework-connect'), $error));
    }
    kbfc_redirect_with('success', __('Disconnected: the platform revoked its key and this site deleted the application password.', 'kbframework-connect'));
});

add_action('admin_post_kbfc_flush', function () {
    kbfc_require_admin('kbfc_flush');
    $n = kbfc_run_queue(true);
    /* translators: %d: number of notices */
    kbfc_redirect_with('success', sprintf(_n('%d notice sent.', '%d notices sent.', $n, 'kbframework-connect'), $n));
});

function kbfc_render_settings_page(): void
{
    if (!current_user_can('manage_options')) {
        return;
    }
    $c = kbfc_connection();
    $w = kbfc_widget_options();
    $msg = get_transient('kbfc_msg_' . get_current_user_id());
    delete_transient('kbfc_msg_' . get_current_user_id());
    echo '<div class="wrap kbfc-settings">';
    echo '<h1>' . esc_html__('kbframework', 'kbframework-connect') . '</h1>';
    if (is_array($msg) && !empty($msg['text'])) {
        $type = in_array($msg['type'] ?? '', ['success', 'error', 'warning'], true) ? $msg['type'] : 'info';
        printf('<div class="notice notice-%s" id="kbfc-message"><p>%s</p></div>', esc_attr($type), esc_html($msg['text']));
    }
    // "Settings saved" comes from wp-admin/options-head.php (every page under Settings shows it).

    echo '<h2>' . esc_html__('Connection', 'kbframework-connect') . '</h2>';
    if (!$c) {
        echo '<p>' . esc_html__('In the kbframework admin panel open Sources → “Connect a WordPress site”, create a code and paste it here. The plugin creates the application password the assistant needs and sends it in the same step: nothing to copy by hand.', 'kbframework-connect') . '</p>';
        echo '<form method="post" action="' . esc_url(admin_url('admin-post.php')) . '" id="kbfc-connect-form">';
        wp_nonce_field('kbfc_connect');
        echo '<input type="hidden" name="action" value="kbfc_connect">';
        echo '<table class="form-table" role="presentation"><tr><th scope="row"><label for="kbfc_code">' . esc_html__('Connect code', 'kbframework-connect') . '</label></th>';
        echo '<td><input type="text" class="large-text code" id="kbfc_code" name="kbfc_code" autocomplete="off" spellcheck="false" required placeholder="kbfc1.…">';
        echo '<p class="description">' . esc_html__('Works once and expires after 15 minutes.', 'kbframework-connect') . '</p></td></tr></table>';
        submit_button(__('Connect', 'kbframework-connect'), 'primary', 'kbfc_submit_connect');
        echo '</form>';
    } else {
        echo '<table class="form-table" role="presentation" id="kbfc-connection">';
        $rows = [
            __('Platform', 'kbframework-connect') => esc_html($c['platform_url']),
            __('Source', 'kbframework-connect') => '<code>' . esc_html($c['source_id']) . '</code>',
            __('Assistant key', 'kbframework-connect') => '<code>' . esc_html(kbfc_mask((string) $c['assistant_key'])) . '</code>',
            __('Signing secret', 'kbframework-connect') => '<code>' . esc_html(kbfc_mask((string) $c['signing_secret'])) . '</code>',
            __('Synced post types', 'kbframework-connect') => esc_html(implode(', ', (array) $c['post_types'])),
            __('Connected', 'kbframework-connect') => esc_html(wp_date(get_option('date_format') . ' ' . get_option('time_format'), (int) $c['connected_at'])),
        ];
        foreach ($rows as $label => $html) {
            echo '<tr><th scope="row">' . esc_html($label) . '</th><td>' . $html . '</td></tr>'; // $html is escaped above
        }
        echo '</table>';
        echo '<form method="post" action="' . esc_url(admin_url('admin-post.php')) . '" id="kbfc-disconnect-form" onsubmit="return confirm(this.dataset.confirm)" data-confirm="' . esc_attr__('Disconnect this site? The platform stops reading it and the chat key is revoked.', 'kbframework-connect') . '">';
        wp_nonce_field('kbfc_disconnect');
        echo '<input type="hidden" name="action" value="kbfc_disconnect">';
        submit_button(__('Disconnect', 'kbframework-connect'), 'delete', 'kbfc_submit_disconnect', false);
        echo '</form>';
    }

    echo '<h2>' . esc_html__('Chat widget', 'kbframework-connect') . '</h2>';
    echo '<form method="post" action="' . esc_url(admin_url('options.php')) . '" id="kbfc-widget-form">';
    settings_fields('kbfc_widget_group');
    echo '<table class="form-table" role="presentation">';
    printf('<tr><th scope="row">%s</th><td><label><input type="checkbox" name="%s[enabled]" value="1" %s> %s</label></td></tr>',
        esc_html__('Show on every page', 'kbframework-connect'), esc_attr(KBFC_OPTION_WIDGET), checked($w['enabled'], true, false),
        esc_html__('Show the chat widget', 'kbframework-connect'));
    printf('<tr><th scope="row">%s</th><td><label><input type="checkbox" name="%s[placeholder]" value="1" %s> %s</label><p class="description">%s</p></td></tr>',
        esc_html__('Load on click', 'kbframework-connect'), esc_attr(KBFC_OPTION_WIDGET), checked($w['placeholder'], true, false),
        esc_html__('Show a light chat button; load the chat only when a visitor clicks it', 'kbframework-connect'),
        esc_html__('The page then carries well under 2 KB for the chat until it is opened.', 'kbframework-connect'));
    if ($c) {
        printf('<tr><th scope="row">%s</th><td><span style="display:inline-block;width:1.2em;height:1.2em;border-radius:50%%;vertical-align:middle;background:%s"></span> <code>%s</code> · %s<p class="description">%s</p></td></tr>',
            esc_html__('Branding', 'kbframework-connect'), esc_attr($c['color']), esc_html($c['color']), esc_html($c['welcome']),
            esc_html__('Colour and greeting come from the platform (admin panel → Settings / Embed keys).', 'kbframework-connect'));
    }
    printf('<tr><th scope="row">%s</th><td><code>[kbframework_chat]</code> <code>[kbframework_chat height="700px"]</code><p class="description">%s</p></td></tr>',
        esc_html__('Full-page chat', 'kbframework-connect'),
        esc_html__('Put the shortcode, or the “kbframework chat” block, on any page.', 'kbframework-connect'));
    echo '</table>';
    submit_button(__('Save widget settings', 'kbframework-connect'));
    echo '</form>';

    if ($c) {
        echo '<h2>' . esc_html__('Deliveries', 'kbframework-connect') . '</h2>';
        $last = get_option(KBFC_OPTION_LAST_DELIVERY);
        $stats = get_option(KBFC_OPTION_STATS);
        $pending = kbfc_use_action_scheduler() ? null : count(kbfc_pending());
        echo '<table class="form-table" role="presentation" id="kbfc-deliveries">';
        if (is_array($last)) {
            $when = wp_date(get_option('date_format') . ' ' . get_option('time_format') . ':s', (int) $last['at']);
            printf('<tr><th scope="row">%s</th><td id="kbfc-last-delivery" data-ok="%s">%s · %s #%d (%s) · <strong>%s</strong> · HTTP %d · %s %d%s</td></tr>',
                esc_html__('Last delivery', 'kbframework-connect'), $last['ok'] ? '1' : '0', esc_html($when), esc_html($last['post_type']), (int) $last['post_id'],
                esc_html($last['event']), esc_html($last['result']), (int) $last['status'], esc_html__('attempt', 'kbframework-connect'), (int) $last['attempt'],
                !empty($last['retry_at']) ? esc_html(' · ' . sprintf(__('next try %s', 'kbframework-connect'), wp_date(get_option('time_format') . ':s', (int) $last['retry_at']))) : '');
        } else {
            printf('<tr><th scope="row">%s</th><td id="kbfc-last-delivery">%s</td></tr>', esc_html__('Last delivery', 'kbframework-connect'), esc_html__('none yet', 'kbframework-connect'));
        }
        if (is_array($stats)) {
            printf('<tr><th scope="row">%s</th><td>%s</td></tr>', esc_html__('Totals', 'kbframework-connect'),
                esc_html(sprintf(__('%1$d delivered, %2$d failed attempts, %3$d given up', 'kbframework-connect'), $stats['delivered'], $stats['failed'], $stats['gave_up'])));
        }
        if ($pending !== null) {
            printf('<tr><th scope="row">%s</th><td id="kbfc-pending">%d</td></tr>', esc_html__('Waiting in the queue', 'kbframework-connect'), (int) $pending);
        }
        echo '</table>';
        if ($pending) {
            echo '<form method="post" action="' . esc_url(admin_url('admin-post.php')) . '">';
            wp_nonce_field('kbfc_flush');
            echo '<input type="hidden" name="action" value="kbfc_flush">';
            submit_button(__('Send pending now', 'kbframework-connect'), 'secondary', 'kbfc_submit_flush', false);
            echo '</form>';
        }
    }
    echo '</div>';
}
