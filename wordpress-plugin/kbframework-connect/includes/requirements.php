<?php
/**
 * Activation: refuse clearly on a PHP or WordPress that is too old (WordPress only reads the
 * header's "Requires" lines when installing from the directory, not from an uploaded zip).
 */

if (!defined('ABSPATH')) {
    exit;
}

/** Why this site cannot run the plugin, or '' when it can. */
function kbfc_requirements_problem(): string
{
    global $wp_version;
    if (version_compare(PHP_VERSION, KBFC_MIN_PHP, '<')) {
        /* translators: 1: required PHP version, 2: running PHP version */
        return sprintf(__('kbframework Connect needs PHP %1$s or newer; this site runs PHP %2$s.', 'kbframework-connect'), KBFC_MIN_PHP, PHP_VERSION);
    }
    if (version_compare((string) $wp_version, KBFC_MIN_WP, '<')) {
        /* translators: 1: required WordPress version, 2: running WordPress version */
        return sprintf(__('kbframework Connect needs WordPress %1$s or newer; this site runs WordPress %2$s.', 'kbframework-connect'), KBFC_MIN_WP, $wp_version);
    }
    if (!class_exists('WP_Application_Passwords')) {
        return __('kbframework Connect needs application passwords (WordPress 5.6 or newer).', 'kbframework-connect');
    }
    return '';
}

function kbfc_activate(): void
{
    $problem = kbfc_requirements_problem();
    if ($problem !== '') {
        deactivate_plugins(plugin_basename(KBFC_FILE));
        wp_die(esc_html($problem), esc_html__('Plugin could not be activated', 'kbframework-connect'), ['back_link' => true]);
    }
    add_option(KBFC_OPTION_WIDGET, ['enabled' => false, 'placeholder' => true], '', true);
    set_transient('kbfc_activated', 1, 300);
}

function kbfc_deactivate(): void
{
    // With the plugin off nothing would deliver queued notices: drop them; the platform's
    // scheduled sync catches up with whatever changed meanwhile.
    kbfc_clear_queue();
}

/** After activation (and until connected), point the admin to the settings page. */
add_action('admin_notices', function () {
    if (!current_user_can('manage_options') || kbfc_connection()) {
        return;
    }
    $screen = function_exists('get_current_screen') ? get_current_screen() : null;
    if ($screen && $screen->id === 'settings_page_kbframework-connect') {
        return;
    }
    if (!get_transient('kbfc_activated') && (!$screen || $screen->id !== 'plugins')) {
        return;
    }
    printf(
        '<div class="notice notice-info"><p>%s <a href="%s">%s</a></p></div>',
        esc_html__('kbframework Connect is active. Paste your connect code to link this site to your assistant.', 'kbframework-connect'),
        esc_url(admin_url('options-general.php?page=kbframework-connect')),
        esc_html__('Connect now', 'kbframework-connect')
    );
});
