<?php
/**
 * The connection to the platform: exchanging a connect code, signing requests, disconnecting.
 *
 * The connect code is `kbfc1.<base64url(platform URL)>.<token>`. Exchanging it creates an
 * application password for the current administrator (the platform reads posts through the
 * REST API with it) and sends it in the same request; the platform answers with the source
 * id, the signing secret, the assistant key and the widget's branding. A failed exchange
 * deletes the application password again.
 */

if (!defined('ABSPATH')) {
    exit;
}

/** The stored connection, or null when this site is not connected. */
function kbfc_connection(): ?array
{
    $c = get_option(KBFC_OPTION_CONNECTION);
    return (is_array($c) && !empty($c['source_id']) && !empty($c['signing_secret'])) ? $c : null;
}

/** True for loopback / private addresses and *.localhost / *.test names (local development). */
function kbfc_is_local_host(string $host): bool
{
    $host = strtolower(trim($host, '[]'));
    if ($host === 'localhost' || substr($host, -10) === '.localhost' || substr($host, -5) === '.test') {
        return true;
    }
    if (filter_var($host, FILTER_VALIDATE_IP)) {
        return !filter_var($host, FILTER_VALIDATE_IP, FILTER_FLAG_NO_PRIV_RANGE | FILTER_FLAG_NO_RES_RANGE);
    }
    return false;
}

/**
 * Whether plain http may be used to reach $url: only for local development (this site's
 * environment type is "local" or "development", or the platform is on a local address).
 */
function kbfc_url_allowed(string $url): bool
{
    $parts = wp_parse_url($url);
    if (!is_array($parts) || empty($parts['host']) || empty($parts['scheme'])) {
        return false;
    }
    if ($parts['scheme'] === 'https') {
        return true;
    }
    if ($parts['scheme'] !== 'http') {
        return false;
    }
    $env = function_exists('wp_get_environment_type') ? wp_get_environment_type() : 'production';
    return in_array($env, ['local', 'development'], true) || kbfc_is_local_host($parts['host']);
}

/** [platform URL, token] of a connect code, or a WP_Error saying what is wrong with it. */
function kbfc_parse_code(string $code)
{
    $parts = explode('.', trim($code));
    if (count($parts) !== 3 || $parts[0] !== 'kbfc1' || $parts[2] === '') {
        return new WP_Error('kbfc_code', __('That is not a connect code. Copy it again from the admin panel (Sources → Connect a WordPress site).', 'kbframework-connect'));
    }
    $b64 = strtr($parts[1], '-_', '+/');
    $url = base64_decode($b64 . str_repeat('=', (4 - strlen($b64) % 4) % 4), true);
    if (!is_string($url) || !preg_match('#^https?://#i', $url)) {
        return new WP_Error('kbfc_code', __('That connect code is damaged. Copy it again.', 'kbframework-connect'));
    }
    $url = untrailingslashit($url);
    if (!kbfc_url_allowed($url)) {
        return new WP_Error('kbfc_https', __('The platform must be reached over HTTPS (plain HTTP is allowed only for local development).', 'kbframework-connect'));
    }
    return [$url, $parts[2]];
}

/** The post types the platform may sync: public, visible in the REST API, not attachments. */
function kbfc_public_post_types(): array
{
    $types = get_post_types(['public' => true, 'show_in_rest' => true], 'names');
    return array_values(array_diff($types, ['attachment']));
}

/** A random nonce for signed requests. */
function kbfc_nonce(): string
{
    return bin2hex(random_bytes(16));
}

/** POST a signed JSON body: HMAC-SHA256 of the exact bytes sent, with a timestamp and nonce inside. */
function kbfc_signed_post(string $url, array $body, string $secret, int $timeout = 10)
{
    $body['ts'] = time();
    $body['nonce'] = kbfc_nonce();
    $raw = wp_json_encode($body);
    return wp_remote_post($url, [
        'body' => $raw,
        'timeout' => $timeout,
        'redirection' => 0,
        'headers' => [
            'Content-Type' => 'application/json',
            'X-KBF-Signature' => 'sha256=' . hash_hmac('sha256', $raw, $secret),
            'User-Agent' => 'kbframework-connect/' . KBFC_VERSION . '; ' . home_url('/'),
        ],
    ]);
}

/** The platform's error message in a JSON error body, else a generic one with the status. */
function kbfc_response_error($response): string
{
    if (is_wp_error($response)) {
        return $response->get_error_message();
    }
    $code = (int) wp_remote_retrieve_response_code($response);
    $data = json_decode((string) wp_remote_retrieve_body($response), true);
    $msg = '';
    if (is_array($data)) {
        $err = $data['error'] ?? $data;
        $msg = is_array($err) ? (string) ($err['message'] ?? '') : (string) $err;
    }
    /* translators: %d: HTTP status code */
    return $msg !== '' ? $msg : sprintf(__('The platform answered with HTTP %d.', 'kbframework-connect'), $code);
}

/**
 * Exchange a connect code; on success the connection is stored and true is returned, else a
 * WP_Error (and no application password is left behind).
 */
function kbfc_connect(string $code, int $user_id)
{
    $parsed = kbfc_parse_code($code);
    if (is_wp_error($parsed)) {
        return $parsed;
    }
    [$platform] = $parsed;
    if (!wp_is_application_passwords_available()) {
        return new WP_Error('kbfc_app_passwords', __('Application passwords are not available on this site (WordPress offers them over HTTPS, or on a local site). Enable HTTPS and try again.', 'kbframework-connect'));
    }
    $user = get_userdata($user_id);
    if (!$user) {
        return new WP_Error('kbfc_user', __('No current user.', 'kbframework-connect'));
    }
    $created = WP_Application_Passwords::create_new_application_password($user_id, [
        'name' => 'kbframework (' . wp_parse_url($platform, PHP_URL_HOST) . ')',
    ]);
    if (is_wp_error($created)) {
        return $created;
    }
    [$password, $item] = $created;
    $response = wp_remote_post($platform . '/api/webhooks/v1/wordpress/connect', [
        'timeout' => 30,
        'redirection' => 0,
        'headers' => ['Content-Type' => 'application/json', 'Accept' => 'application/json'],
        'body' => wp_json_encode([
            'code' => trim($code),
            'site_url' => untrailingslashit(home_url()),
            'rest_url' => get_rest_url(),
            'site_name' => get_bloginfo('name'),
            'username' => $user->user_login,
            'app_password' => $password,
            'app_password_uuid' => $item['uuid'],
            'post_types' => kbfc_public_post_types(),
            'plugin_version' => KBFC_VERSION,
        ]),
    ]);
    $status = is_wp_error($response) ? 0 : (int) wp_remote_retrieve_response_code($response);
    $data = $status ? json_decode((string) wp_remote_retrieve_body($response), true) : null;
    if ($status < 200 || $status >= 300 || !is_array($data) || empty($data['source_id']) || empty($data['signing_secret'])) {
        WP_Application_Passwords::delete_application_password($user_id, $item['uuid']);
        /* translators: %s: the platform's error message */
        return new WP_Error('kbfc_exchange', sprintf(__('Connecting failed: %s', 'kbframework-connect'), kbfc_response_error($response)));
    }
    $widget = is_array($data['widget'] ?? null) ? $data['widget'] : [];
    $color = (string) ($widget['color'] ?? '');
    update_option(KBFC_OPTION_CONNECTION, [
        'platform_url' => untrailingslashit(esc_url_raw((string) ($data['platform_url'] ?? $platform))),
        'source_id' => sanitize_text_field((string) $data['source_id']),
        'signing_secret' => (string) $data['signing_secret'],
        'assistant_key' => sanitize_text_field((string) ($data['assistant_key'] ?? '')),
        'notice_url' => esc_url_raw((string) ($data['notice_url'] ?? '')),
        'disconnect_url' => esc_url_raw((string) ($data['disconnect_url'] ?? '')),
        'widget_url' => esc_url_raw((string) ($data['widget_url'] ?? '')),
        'embed_url' => esc_url_raw((string) ($data['embed_url'] ?? '')),
        'post_types' => array_values(array_map('sanitize_key', (array) ($data['post_types'] ?? []))),
        'color' => preg_match('/^#[0-9a-fA-F]{3,6}$/', $color) ? $color : '#2f6fed',
        'welcome' => sanitize_text_field((string) ($widget['welcome'] ?? '')),
        'title' => sanitize_text_field((string) ($widget['title'] ?? '')),
        'app_password_uuid' => $item['uuid'],
        'app_user_id' => $user_id,
        'connected_at' => time(),
    ], true); // autoloaded: every front-end page and every save reads it
    delete_option(KBFC_OPTION_LAST_DELIVERY);
    return true;
}

/**
 * Revoke both sides: tell the platform (signed; best effort, it may be gone), delete the
 * application password we made, forget the connection and drop queued notices. Returns the
 * platform's error message, or '' when the platform confirmed.
 */
function kbfc_disconnect(): string
{
    $c = kbfc_connection();
    $error = '';
    if ($c) {
        if (!empty($c['disconnect_url']) && kbfc_url_allowed($c['disconnect_url'])) {
            $response = kbfc_signed_post($c['disconnect_url'], ['source_id' => $c['source_id']], $c['signing_secret']);
            $status = is_wp_error($response) ? 0 : (int) wp_remote_retrieve_response_code($response);
            if ($status < 200 || $status >= 300) {
                $error = kbfc_response_error($response);
            }
        }
        if (!empty($c['app_user_id']) && !empty($c['app_password_uuid'])) {
            WP_Application_Passwords::delete_application_password((int) $c['app_user_id'], (string) $c['app_password_uuid']);
        }
    }
    delete_option(KBFC_OPTION_CONNECTION);
    delete_option(KBFC_OPTION_LAST_DELIVERY);
    delete_option(KBFC_OPTION_STATS);
    kbfc_clear_queue();
    return $error;
}

/** A secret shown back only by its last four characters. */
function kbfc_mask(string $secret): string
{
    if ($secret === '') {
        return '';
    }
    return str_repeat('•', 8) . substr($secret, -4);
}
