<?php
/**
 * The chat on the site without code: the widget script on every page (deferred, so it never
 * blocks rendering), or a click-to-load button that costs the page a few hundred bytes until
 * a visitor opens the chat; a `[kbframework_chat]` shortcode and a `kbframework/chat` block
 * for the full-page chat in an iframe. Brand colour and greeting come from the platform.
 */

if (!defined('ABSPATH')) {
    exit;
}

function kbfc_widget_options(): array
{
    $w = get_option(KBFC_OPTION_WIDGET);
    $w = is_array($w) ? $w : [];
    return ['enabled' => !empty($w['enabled']), 'placeholder' => !array_key_exists('placeholder', $w) || !empty($w['placeholder'])];
}

/** Settings API sanitizer of the widget options (checkboxes). */
function kbfc_sanitize_widget($input): array
{
    $input = is_array($input) ? $input : [];
    return ['enabled' => !empty($input['enabled']), 'placeholder' => !empty($input['placeholder'])];
}

/** Whether the widget belongs on this front-end page. */
function kbfc_widget_active(): bool
{
    $c = kbfc_connection();
    if (!$c || empty($c['widget_url']) || is_admin() || wp_doing_ajax() || (defined('REST_REQUEST') && REST_REQUEST)) {
        return false;
    }
    return kbfc_widget_options()['enabled'] && (bool) apply_filters('kbfc_show_widget', true);
}

function kbfc_enqueue_widget(): void
{
    if (!kbfc_widget_active() || kbfc_widget_options()['placeholder']) {
        return;
    }
    $c = kbfc_connection();
    // WordPress 6.3+ understands the strategy; older ones read the array as "in footer" and
    // get `defer` from kbfc_script_tag.
    wp_enqueue_script('kbframework-widget', $c['widget_url'], [], null, ['strategy' => 'defer', 'in_footer' => true]);
}

/** Adds `defer` (before WordPress 6.3) and the branding data attributes to the widget's tag. */
function kbfc_script_tag($tag, $handle, $src)
{
    if ($handle !== 'kbframework-widget') {
        return $tag;
    }
    $c = kbfc_connection();
    $attrs = ' data-color="' . esc_attr($c['color'] ?? '') . '"';
    if (!empty($c['welcome'])) {
        $attrs .= ' data-welcome="' . esc_attr($c['welcome']) . '"';
    }
    if (strpos($tag, ' defer') === false) {
        $attrs .= ' defer';
    }
    return preg_replace('/<script\b/', '<script' . $attrs, $tag, 1);
}

/**
 * The click-to-load button: a styled <button> and a tiny script that loads widget.js on the
 * first click and opens the chat. Everything is escaped; the page pays nothing else.
 */
function kbfc_print_placeholder(): void
{
    if (!kbfc_widget_active() || !kbfc_widget_options()['placeholder']) {
        return;
    }
    $c = kbfc_connection();
    $color = $c['color'] ?? '#2f6fed';
    printf(
        '<button type="button" id="kbfc-launch" aria-label="%1$s" title="%1$s" data-src="%2$s" data-color="%3$s" data-welcome="%4$s" style="position:fixed;right:20px;bottom:20px;z-index:2147483000;width:56px;height:56px;border:0;border-radius:50%%;background:%3$s;color:#fff;cursor:pointer;box-shadow:0 4px 14px rgba(0,0,0,.25)"><svg width="26" height="26" viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M4 4h16v12H7l-3 3z"/></svg></button>' . "\n",
        esc_attr__('Open chat', 'kbframework-connect'),
        esc_url($c['widget_url']),
        esc_attr($color),
        esc_attr($c['welcome'] ?? '')
    );
    $js = "(function(b){b&&b.addEventListener('click',function(){b.disabled=true;var s=document.createElement('script');"
        . "s.src=b.dataset.src;s.dataset.color=b.dataset.color;if(b.dataset.welcome)s.dataset.welcome=b.dataset.welcome;"
        . "s.onload=function(){b.remove();window.KBFWidget&&window.KBFWidget.open()};"
        . "s.onerror=function(){b.disabled=false};document.body.appendChild(s)},{once:true})})(document.getElementById('kbfc-launch'));";
    wp_print_inline_script_tag($js, ['id' => 'kbfc-launch-js']);
}

/** The full-page chat in an iframe (shortcode and block). */
function kbfc_render_chat($atts = []): string
{
    $c = kbfc_connection();
    if (!$c || empty($c['embed_url'])) {
        return current_user_can('manage_options')
            ? '<p class="kbfc-not-connected">' . esc_html__('kbframework chat: connect the site first (Settings → kbframework).', 'kbframework-connect') . '</p>'
            : '';
    }
    $atts = shortcode_atts(['height' => '600px', 'title' => __('Chat', 'kbframework-connect')], (array) $atts, 'kbframework_chat');
    $height = preg_match('/^\d{2,4}(px|vh|rem|em|%)?$/', (string) $atts['height']) ? (string) $atts['height'] : '600px';
    if (ctype_digit($height)) {
        $height .= 'px';
    }
    return sprintf(
        '<iframe class="kbfc-chat" src="%s" title="%s" loading="lazy" style="width:100%%;height:%s;border:0;border-radius:12px" allow="clipboard-write"></iframe>',
        esc_url($c['embed_url']),
        esc_attr($atts['title']),
        esc_attr($height)
    );
}

function kbfc_register_block(): void
{
    wp_register_script('kbfc-block-editor', plugins_url('assets/block.js', KBFC_FILE), ['wp-blocks', 'wp-element', 'wp-i18n'], KBFC_VERSION, true);
    register_block_type('kbframework/chat', [
        'api_version' => 2,
        'title' => __('kbframework chat', 'kbframework-connect'),
        'category' => 'widgets',
        'icon' => 'format-chat',
        'editor_script' => 'kbfc-block-editor',
        'attributes' => ['height' => ['type' => 'string', 'default' => '600px']],
        'render_callback' => function ($attributes) {
            return kbfc_render_chat(['height' => $attributes['height'] ?? '600px']);
        },
    ]);
}

add_action('wp_enqueue_scripts', 'kbfc_enqueue_widget');
add_filter('script_loader_tag', 'kbfc_script_tag', 10, 3);
add_action('wp_footer', 'kbfc_print_placeholder', 50);
add_shortcode('kbframework_chat', 'kbfc_render_chat');
add_action('init', 'kbfc_register_block');
