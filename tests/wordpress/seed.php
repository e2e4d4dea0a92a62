<?php
/**
 * Seeds the freshly installed test site with posts, pages, events, images, a draft, a private,
 * a scheduled and a password-protected post, and merges the created ids into the state file.
 *
 * Run by setup_wp.sh after install.php:
 *   KBF_WP_URL=http://127.0.0.1:8089 WP_STATE_FILE=/tmp/kbf-wp-state.json php seed.php
 */

require __DIR__ . '/_bootstrap.php';
require_once ABSPATH . 'wp-admin/includes/image.php';
require_once ABSPATH . 'wp-admin/includes/file.php';
require_once ABSPATH . 'wp-admin/includes/media.php';
require_once ABSPATH . 'wp-admin/includes/post.php';

$state = kbf_read_state();
if (empty($state['user'])) {
    kbf_fail("state file {$kbf_state_file} has no install data; run install.php first");
}
$admin = get_user_by('login', $state['user']);
// Acting as the administrator gives us unfiltered_html, so <script>/<nav>/<style> survive kses.
wp_set_current_user($admin->ID);

$tz = wp_timezone();
$now = new DateTimeImmutable('now', $tz);
$created = [];  // every id we create (to backdate post_modified at the end)

function kbf_insert(array $args): int
{
    global $created, $admin;
    $args += ['post_status' => 'publish', 'post_author' => $admin->ID, 'comment_status' => 'closed'];
    $id = wp_insert_post(wp_slash($args), true);
    if (is_wp_error($id)) {
        kbf_fail('wp_insert_post: ' . $id->get_error_message() . ' for ' . $args['post_title']);
    }
    $created[] = $id;
    return $id;
}

function kbf_local(DateTimeImmutable $d): string
{
    return $d->format('Y-m-d H:i:s');
}

/** A PNG: drawn with GD when available, otherwise a fixed 1x1 PNG. */
function kbf_png(int $w, int $h, array $rgb, string $label): string
{
    if (function_exists('imagecreatetruecolor')) {
        $im = imagecreatetruecolor($w, $h);
        imagefilledrectangle($im, 0, 0, $w, $h, imagecolorallocate($im, $rgb[0], $rgb[1], $rgb[2]));
        $white = imagecolorallocate($im, 255, 255, 255);
        imagestring($im, 5, 20, (int) ($h / 2) - 8, $label, $white);
        ob_start();
        imagepng($im);
        imagedestroy($im);
        return (string) ob_get_clean();
    }
    return base64_decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==');
}

/** Uploads a PNG into the media library and sets it as featured image of $parent_id. */
function kbf_featured_image(int $parent_id, string $filename, string $title, string $alt, array $rgb): int
{
    global $created;
    $upload = wp_upload_bits($filename, null, kbf_png(800, 450, $rgb, $title));
    if (!empty($upload['error'])) {
        kbf_fail('upload: ' . $upload['error']);
    }
    $att_id = wp_insert_attachment([
        'post_mime_type' => 'image/png',
        'post_title' => $title,
        'post_content' => '',
        'post_excerpt' => $alt,  // caption
        'post_status' => 'inherit',
        'guid' => $upload['url'],
    ], $upload['file'], $parent_id, true);
    if (is_wp_error($att_id)) {
        kbf_fail('attachment: ' . $att_id->get_error_message());
    }
    wp_update_attachment_metadata($att_id, wp_generate_attachment_metadata($att_id, $upload['file']));
    update_post_meta($att_id, '_wp_attachment_image_alt', $alt);
    set_post_thumbnail($parent_id, $att_id);
    $created[] = $att_id;
    return $att_id;
}

function kbf_term(string $name, string $taxonomy, string $description = ''): int
{
    $t = term_exists($name, $taxonomy);
    if (!$t) {
        $t = wp_insert_term($name, $taxonomy, ['description' => $description]);
    }
    if (is_wp_error($t)) {
        kbf_fail("term {$name}: " . $t->get_error_message());
    }
    return (int) $t['term_id'];
}

// ---------------------------------------------------------------------------------------------
// Remove wp_install()'s defaults (Hello world!, Sample Page, draft Privacy Policy) for a known set.
foreach (get_posts(['post_type' => ['post', 'page'], 'post_status' => 'any', 'numberposts' => -1]) as $p) {
    wp_delete_post($p->ID, true);
}
update_option('wp_page_for_privacy_policy', 0);

// Taxonomies -----------------------------------------------------------------------------------
$cats = [
    'news' => kbf_term('News', 'category', 'Club and venue news'),
    'guides' => kbf_term('Guides', 'category', 'How-to guides for visitors'),
    'nightlife' => kbf_term('Nightlife', 'category', 'Nightlife in Belgrade and Novi Sad'),
];
$cats['uncategorized'] = (int) get_option('default_category');

// Posts ----------------------------------------------------------------------------------------
$nav = '<nav class="site-nav"><ul><li><a href="/">Home</a></li><li><a href="/events/">Events</a></li>'
    . '<li><a href="/faq/">FAQ</a></li></ul></nav>';
$script = '<script>window.dataLayer = window.dataLayer || []; dataLayer.push({"event": "kbf_tracking_should_be_stripped"});</script>';

$posts = [];
$posts['welcome'] = kbf_insert([
    'post_title' => 'Welcome to Club Nova',
    'post_name' => 'welcome-to-club-nova',
    'post_date' => kbf_local($now->modify('-30 days')->setTime(10, 0)),
    'post_excerpt' => 'Club Nova opens its doors in Belgrade with a techno and jazz programme.',
    'post_category' => [$cats['news'], $cats['nightlife']],
    'tags_input' => ['club', 'nightlife', 'techno'],
    'post_content' => $nav . "\n"
        . "<h2>About the club</h2>\n"
        . "<p>Club Nova is a 600-capacity venue in Savamala, Belgrade. Doors open at <strong>22:00</strong> on Fridays and Saturdays.</p>\n"
        . "<h3>What to expect</h3>\n"
        . "<ul>\n<li>Techno on Fridays</li>\n<li>Jazz on Sundays</li>\n<li>A rooftop terrace in summer</li>\n</ul>\n"
        . $script . "\n"
        . "<h2>Getting there</h2>\n"
        . "<ol>\n<li>Take tram 2 to Savamala.</li>\n<li>Walk 200 m along Karađorđeva street.</li>\n</ol>\n"
        . "<p>Questions? Read our <a href=\"/faq/\">FAQ</a>.</p>",
    'meta_input' => ['subtitle' => 'A new home for techno and jazz'],
]);

$posts['tickets'] = kbf_insert([
    'post_title' => 'How to buy tickets online',
    'post_name' => 'how-to-buy-tickets-online',
    'post_date' => kbf_local($now->modify('-20 days')->setTime(12, 30)),
    'post_excerpt' => 'Step by step: buying, printing and refunding tickets.',
    'post_category' => [$cats['guides']],
    'tags_input' => ['tickets', 'refunds'],
    'post_content' => $nav . "\n"
        . "<style>.promo{color:red}</style>\n"
        . "<h2>Buying a ticket</h2>\n"
        . "<ol>\n<li>Open the event page and click <em>Buy ticket</em>.</li>\n<li>Pay by card; you receive a QR code by e-mail.</li>\n<li>Show the QR code at the door.</li>\n</ol>\n"
        . "<h2>Prices</h2>\n"
        . "<table><thead><tr><th>Ticket</th><th>Price (EUR)</th></tr></thead>"
        . "<tbody><tr><td>Early bird</td><td>25</td></tr><tr><td>Regular</td><td>40</td></tr></tbody></table>\n"
        . "<h2>Refunds</h2>\n"
        . "<p>Tickets are refundable up to 48 hours before the event. See the <a href=\"/return-policy/\">return policy</a>.</p>\n"
        . $script,
]);

// Block-editor (Gutenberg) markup and HTML entities in the title.
$posts['jazz'] = kbf_insert([
    'post_title' => 'Jazz & Blues nights are back — “Live” every Sunday',
    'post_name' => 'jazz-blues-nights-are-back',
    'post_date' => kbf_local($now->modify('-10 days')->setTime(18, 0)),
    'post_category' => [$cats['news']],
    'tags_input' => ['jazz', 'live music'],
    'post_content' => "<!-- wp:heading -->\n<h2>Sunday sessions</h2>\n<!-- /wp:heading -->\n\n"
        . "<!-- wp:paragraph -->\n<p>Every Sunday from 20:00 the <strong>Nova Jazz Trio</strong> plays two sets. Entry is free before 21:00.</p>\n<!-- /wp:paragraph -->\n\n"
        . "<!-- wp:list -->\n<ul><li>Set one: 20:30</li><li>Set two: 22:00</li></ul>\n<!-- /wp:list -->\n\n"
        . "<!-- wp:html -->\n{$script}\n<!-- /wp:html -->\n\n"
        . "<!-- wp:quote -->\n<blockquote class=\"wp-block-quote\"><p>The best jazz room in town.</p><cite>Local press</cite></blockquote>\n<!-- /wp:quote -->",
]);

// Non-ASCII (Serbian Latin + Cyrillic) content.
$posts['novi_sad'] = kbf_insert([
    'post_title' => 'Vodič kroz noćni život Novog Sada',
    'post_name' => 'vodic-novi-sad',
    'post_date' => kbf_local($now->modify('-5 days')->setTime(9, 15)),
    'post_category' => [$cats['guides'], $cats['nightlife']],
    'tags_input' => ['novi sad'],
    'post_content' => "<h2>Gde izaći u Novom Sadu?</h2>\n"
        . "<p>Petrovaradinska tvrđava, Laze Telečkog i Kineska četvrt su najpoznatije lokacije. Ћирилица: Нови Сад.</p>\n"
        . "<ul>\n<li>Žurke: petak i subota</li>\n<li>Džez: nedeljom</li>\n</ul>",
]);

// Non-public statuses.
$draft_id = kbf_insert([
    'post_title' => 'Draft: next season lineup (not published)',
    'post_status' => 'draft',
    'post_category' => [$cats['news']],
    'post_content' => '<p>This draft must never be indexed.</p>',
]);
$private_id = kbf_insert([
    'post_title' => 'Private: staff notes',
    'post_status' => 'private',
    'post_date' => kbf_local($now->modify('-3 days')->setTime(8, 0)),
    'post_content' => '<p>Internal only: the safe code is 1234. Must never be indexed.</p>',
]);
$future_id = kbf_insert([
    'post_title' => 'Scheduled: New Year announcement',
    'post_status' => 'future',
    'post_date' => kbf_local($now->modify('+30 days')->setTime(12, 0)),
    'post_content' => '<p>Scheduled for the future.</p>',
]);
$protected_id = kbf_insert([
    'post_title' => 'Members-only guest list',
    'post_password' => 'kbf-secret',
    'post_date' => kbf_local($now->modify('-2 days')->setTime(14, 0)),
    'post_content' => '<p>Password-protected content.</p>',
]);

// Pages ----------------------------------------------------------------------------------------
$pages = [];
$pages['return_policy'] = kbf_insert([
    'post_type' => 'page',
    'post_title' => 'Return policy',
    'post_name' => 'return-policy',
    'post_date' => kbf_local($now->modify('-60 days')->setTime(10, 0)),
    'menu_order' => 2,
    'post_content' => $nav . "\n"
        . "<h2>Refunds</h2>\n"
        . "<p>You can return a ticket for a full refund up to <strong>48 hours</strong> before the event starts. "
        . "After that, tickets are non-refundable but can be transferred to another person.</p>\n"
        . "<h2>Cancelled events</h2>\n"
        . "<p>If we cancel an event, the refund is automatic within 14 days.</p>\n"
        . "<h2>How to request a refund</h2>\n"
        . "<ol>\n<li>Reply to your ticket e-mail.</li>\n<li>Include the order number.</li>\n</ol>\n"
        . $script,
]);
$pages['faq'] = kbf_insert([
    'post_type' => 'page',
    'post_title' => 'FAQ',
    'post_name' => 'faq',
    'post_date' => kbf_local($now->modify('-60 days')->setTime(11, 0)),
    'menu_order' => 1,
    'post_content' => "<h2>Frequently asked questions</h2>\n"
        . "<h3>Is there a dress code?</h3>\n<p>No formal dress code, but no sportswear on Saturdays.</p>\n"
        . "<h3>What is the minimum age?</h3>\n<p>18+. Bring an ID.</p>\n"
        . "<h3>Can I get a refund?</h3>\n<p>Yes, up to 48 hours before the event. See the return policy.</p>\n"
        . "<h3>Do you have a cloakroom?</h3>\n<p>Yes, it costs 2 EUR.</p>\n"
        . $nav,
]);

// Events ---------------------------------------------------------------------------------------
$tonight = $now->setTime(23, 0);
if ($tonight <= $now) {
    // After 23:00 local time "tonight" becomes one hour from now.
    $tonight = $now->modify('+1 hour')->setTime((int) $now->modify('+1 hour')->format('H'), 0);
}
$saturday = $now->modify('saturday')->setTime(22, 0);  // today if today is Saturday
$event_specs = [
    [
        'key' => 'tonight', 'title' => 'Techno Night: Kolektiv b2b Sava', 'slug' => 'techno-night-kolektiv',
        'start' => $tonight, 'venue' => 'Club Nova', 'city' => 'Belgrade', 'price' => '25', 'genre' => 'techno',
        'image' => [30, 30, 60], 'posted' => -2,
        'body' => "<p>An all-night techno session in the main room.</p>\n<ul>\n<li>23:00 Kolektiv</li>\n<li>02:00 Sava</li>\n</ul>",
    ],
    [
        'key' => 'saturday', 'title' => 'Jazz on the Danube', 'slug' => 'jazz-on-the-danube',
        'start' => $saturday, 'venue' => 'Dorćol Platz', 'city' => 'Belgrade', 'price' => '40', 'genre' => 'jazz',
        'image' => [120, 60, 20], 'posted' => -3,
        'body' => "<h2>Line-up</h2>\n<p>The Nova Jazz Trio with guest saxophonist Ana Petrović.</p>",
    ],
    [
        'key' => 'next_week', 'title' => 'Fortress Techno Marathon', 'slug' => 'fortress-techno-marathon',
        'start' => $now->modify('+7 days')->setTime(22, 0), 'venue' => 'Petrovaradin Fortress', 'city' => 'Novi Sad',
        'price' => '25', 'genre' => 'techno', 'image' => null, 'posted' => -5,
        'body' => "<p>Twelve hours of techno on the fortress walls. {$script}</p>",
    ],
    [
        'key' => 'past', 'title' => 'Autumn Jazz Session', 'slug' => 'autumn-jazz-session',
        'start' => $now->modify('-10 days')->setTime(20, 0), 'venue' => 'Kulturni centar Novi Sad', 'city' => 'Novi Sad',
        'price' => '40', 'genre' => 'jazz', 'image' => null, 'posted' => -25,
        'body' => '<p>A past event: it already happened.</p>',
    ],
    [
        'key' => 'in_three_weeks', 'title' => 'Free Open-Air Jam', 'slug' => 'free-open-air-jam',
        'start' => $now->modify('+21 days')->setTime(19, 0), 'venue' => 'Dunavski park', 'city' => 'Novi Sad',
        'price' => '0', 'genre' => 'jazz', 'image' => null, 'posted' => -4,
        'body' => '<p>Free entry. Bring your instrument.</p>',
    ],
];

$events = [];
$featured = [];
foreach ($event_specs as $spec) {
    $start = $spec['start'];
    $meta = [
        'event_date' => kbf_local($start),
        'event_end' => kbf_local($start->modify('+5 hours')),
        'venue_name' => $spec['venue'],
        'city' => $spec['city'],
        'ticket_url' => 'https://tickets.example.com/' . $spec['slug'],
        'price' => $spec['price'],
        'genre' => $spec['genre'],
    ];
    $id = kbf_insert([
        'post_type' => 'event',
        'post_title' => $spec['title'],
        'post_name' => $spec['slug'],
        'post_date' => kbf_local($now->modify($spec['posted'] . ' days')->setTime(16, 0)),
        'post_excerpt' => "{$spec['genre']} at {$spec['venue']}, {$spec['city']}",
        'post_content' => $spec['body'],
        'meta_input' => $meta,
    ]);
    $event = ['id' => $id, 'key' => $spec['key'], 'slug' => $spec['slug'], 'title' => $spec['title']] + $meta;
    if ($spec['image']) {
        $event['featured_media'] = kbf_featured_image($id, $spec['slug'] . '.png', $spec['title'], "Poster for {$spec['title']}", $spec['image']);
        $featured[$id] = $event['featured_media'];
    }
    $events[] = $event;
}

$draft_event_id = kbf_insert([
    'post_type' => 'event',
    'post_title' => 'Draft event: secret warehouse party',
    'post_status' => 'draft',
    'post_content' => '<p>Not announced yet.</p>',
    'meta_input' => ['event_date' => kbf_local($now->modify('+14 days')->setTime(23, 0)), 'city' => 'Belgrade', 'genre' => 'techno', 'price' => '30'],
]);

// Featured image on a regular post too.
$featured[$posts['welcome']] = kbf_featured_image($posts['welcome'], 'club-nova.png', 'Club Nova', 'The Club Nova main room', [10, 90, 110]);

// Make post_modified equal post_date (like a real site whose content was written earlier), so that
// `modified_after=<seeded_at>` returns nothing until a test edits something.
global $wpdb;
foreach ($created as $id) {
    $p = get_post($id);
    if ($p->post_status === 'future' || $p->post_type === 'attachment') {
        continue;
    }
    $wpdb->update($wpdb->posts, ['post_modified' => $p->post_date, 'post_modified_gmt' => get_gmt_from_date($p->post_date)], ['ID' => $id]);
    clean_post_cache($id);
}
// Attachments: modified = their parent's date (they were "uploaded" with it).
foreach ($featured as $parent => $att) {
    $pp = get_post($parent);
    $wpdb->update($wpdb->posts, [
        'post_date' => $pp->post_date, 'post_date_gmt' => $pp->post_date_gmt,
        'post_modified' => $pp->post_date, 'post_modified_gmt' => $pp->post_date_gmt,
    ], ['ID' => $att]);
    clean_post_cache($att);
}

$tag_ids = [];
foreach (get_terms(['taxonomy' => 'post_tag', 'hide_empty' => false]) as $t) {
    $tag_ids[$t->slug] = $t->term_id;
}

$state['seeded_at'] = gmdate('Y-m-d\TH:i:s\Z');
$state['posts'] = $posts;
$state['pages'] = $pages;
$state['events'] = $events;
$state['draft_id'] = $draft_id;
$state['private_id'] = $private_id;
$state['future_id'] = $future_id;
$state['protected_id'] = $protected_id;
$state['protected_password'] = 'kbf-secret';
$state['draft_event_id'] = $draft_event_id;
$state['featured_media'] = array_map('intval', $featured);  // {parent id: attachment id}
$state['categories'] = $cats;
$state['tags'] = $tag_ids;
$state['published_counts'] = [
    'post' => count($posts) + 1,  // + the password-protected post (it is status publish)
    'page' => count($pages),
    'event' => count($events),
];
kbf_write_state($state);

printf("seeded %d posts, %d pages, %d events, %d images (+ draft %d, private %d, future %d, protected %d, draft event %d)\n",
    count($posts), count($pages), count($events), count($featured), $draft_id, $private_id, $future_id, $protected_id, $draft_event_id);
