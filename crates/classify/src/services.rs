//! The host-name → service table: the `App` half of an nDPI-style `Master.App` label.
//!
//! Why a table of domain suffixes: a dissector learns the server's name (TLS/QUIC SNI, HTTP
//! `Host`, DNS query name) and services are known by the domains they run under, not by the
//! exact host (`r3---sn-a5mekn7s.googlevideo.com` is YouTube because it is under
//! `googlevideo.com`). So each entry is a registered domain, or a subdomain that a service owns
//! inside someone else's domain, and a host matches an entry when it *is* that domain or lies
//! under it, on a label boundary: `www.youtube.com` and `youtube.com` match `youtube.com`,
//! `notyoutube.com` does not. When several entries match, the longest one wins, which lets a
//! specific subdomain override its parent (`upload.youtube.com` is `YouTubeUpload`,
//! `mail.google.com` is `GMail`, everything else under `google.com` is `Google`).
//!
//! The service names are nDPI's own application names, spelled exactly as nDPI prints them
//! (`YouTube`, `GoogleServices`, `NetFlix`, `MS_OneDrive`, `DoH_DoT`, ...), so our labels can be
//! compared with nDPI's one for one. nDPI's host-match list (`src/lib/ndpi_content_match.c.inc`
//! and the generated lists beside it) is the reference for names and domains; where nDPI has
//! changed its mind over time, the table follows the labels nDPI gives in our reference capture
//! set (`ndpi-dev/flows.csv`). nDPI's `google.`-style patterns (any country domain) become the
//! concrete domains in use; its prefix patterns (`igcdn-photos-`, `-buy.itunes.apple.com`) have
//! no suffix form, so such hosts get the service of their parent domain (or none).
//!
//! Adding an entry: put one `("suffix", "NdpiName")` line into `SERVICES`, in the group of its
//! vendor. The suffix is lowercase, without a leading or trailing dot; the name must be a name
//! nDPI really uses (it is one label: no `.`). To split a service out of a broader one, add the
//! more specific suffix: longest match wins, order in the table does not matter. The tests
//! reject duplicates and malformed suffixes.
//!
//! Lookup is allocation-free: the host is lowercased into a stack buffer, then the host and each
//! parent domain in turn (longest first) is looked up in a map built once from the table.

use rustc_hash::FxHashMap as HashMap;
use std::hash::{Hash, Hasher};
use std::sync::LazyLock;

/// Longest DNS name, in bytes, without the trailing dot.
const MAX_HOST_LEN: usize = 253;

/// Domain suffix → nDPI application name.
static SERVICES: &[(&str, &str)] = &[
    // Google: web, ads, analytics, infrastructure.
    ("google.com", "Google"),
    ("google.ad", "Google"),
    ("google.ae", "Google"),
    ("google.at", "Google"),
    ("google.be", "Google"),
    ("google.bg", "Google"),
    ("google.ca", "Google"),
    ("google.ch", "Google"),
    ("google.cl", "Google"),
    ("google.cn", "Google"),
    ("google.co.id", "Google"),
    ("google.co.in", "Google"),
    ("google.co.jp", "Google"),
    ("google.co.kr", "Google"),
    ("google.co.uk", "Google"),
    ("google.com.ar", "Google"),
    ("google.com.au", "Google"),
    ("google.com.br", "Google"),
    ("google.com.hk", "Google"),
    ("google.com.mx", "Google"),
    ("google.com.tr", "Google"),
    ("google.com.tw", "Google"),
    ("google.cz", "Google"),
    ("google.de", "Google"),
    ("google.dk", "Google"),
    ("google.es", "Google"),
    ("google.eu", "Google"),
    ("google.fi", "Google"),
    ("google.fr", "Google"),
    ("google.gr", "Google"),
    ("google.hu", "Google"),
    ("google.ie", "Google"),
    ("google.it", "Google"),
    ("google.nl", "Google"),
    ("google.no", "Google"),
    ("google.pl", "Google"),
    ("google.pt", "Google"),
    ("google.ro", "Google"),
    ("google.ru", "Google"),
    ("google.se", "Google"),
    ("google.sk", "Google"),
    ("gstatic.com", "Google"),
    ("gvt1.com", "Google"),
    ("gvt2.com", "Google"),
    ("gvt3.com", "Google"),
    ("ggpht.com", "Google"),
    ("googleusercontent.com", "Google"),
    ("1e100.net", "Google"),
    ("goog", "Google"),
    ("googlesyndication.com", "Google"),
    ("googleadservices.com", "Google"),
    ("doubleclick.net", "Google"),
    ("2mdn.net", "Google"),
    ("dmtry.com", "Google"),
    ("google-analytics.com", "Google"),
    ("app-measurement.com", "Google"),
    ("ampproject.org", "Google"),
    ("ampproject.net", "Google"),
    ("android.com", "Google"),
    ("googleapis.com", "GoogleServices"),
    ("googletagmanager.com", "GoogleServices"),
    ("googletagservices.com", "GoogleServices"),
    ("mtalk.google.com", "GoogleServices"),
    ("mail.google.com", "GMail"),
    ("inbox.google.com", "GMail"),
    ("gmail.com", "GMail"),
    ("googlemail.com", "GMail"),
    ("maps.google.com", "GoogleMaps"),
    ("maps.gstatic.com", "GoogleMaps"),
    ("docs.google.com", "GoogleDocs"),
    ("docs.googleusercontent.com", "GoogleDocs"),
    ("drive.google.com", "GoogleDrive"),
    ("drive-thirdparty.googleusercontent.com", "GoogleDrive"),
    ("drivefrontend-pa.googleapis.com", "GoogleDrive"),
    ("meet.google.com", "GoogleMeet"),
    ("chat.google.com", "GoogleChat"),
    ("classroom.google.com", "GoogleClassroom"),
    ("backup.googleapis.com", "GoogleCloud"),
    ("android.clients.google.com", "PlayStore"),
    ("play-lh.googleusercontent.com", "PlayStore"),
    ("play-fe.googleapis.com", "PlayStore"),
    ("googlezip.net", "DataSaver"),
    ("datasaver.googleapis.com", "DataSaver"),
    ("waze.com", "Waze"),
    // YouTube.
    ("youtube.com", "YouTube"),
    ("youtu.be", "YouTube"),
    ("ytimg.com", "YouTube"),
    ("googlevideo.com", "YouTube"),
    ("yt3.ggpht.com", "YouTube"),
    ("youtube-nocookie.com", "YouTube"),
    ("youtubei.googleapis.com", "YouTube"),
    ("youtube-ui.l.google.com", "YouTube"),
    ("youtubeeducation.com", "YouTube"),
    ("upload.youtube.com", "YouTubeUpload"),
    ("upload.video.google.com", "YouTubeUpload"),
    ("kids.youtube.com", "YouTubeKids"),
    ("youtubekids.com", "YouTubeKids"),
    // Meta.
    ("facebook.com", "Facebook"),
    ("facebook.net", "Facebook"),
    ("fbcdn.net", "Facebook"),
    ("fbsbx.com", "Facebook"),
    ("fb.com", "Facebook"),
    ("fb.gg", "Facebook"),
    ("fbwat.ch", "Facebook"),
    ("fbstatic-a.akamaihd.net", "Facebook"),
    ("fna.fbcdn.net", "FbookReelStory"),
    ("xx.fbcdn.net", "FbookReelStory"),
    ("messenger.com", "FacebookMessenger"),
    ("m.me", "FacebookMessenger"),
    ("edge-mqtt.facebook.com", "FacebookMessenger"),
    ("mqtt-mini.facebook.com", "FacebookMessenger"),
    ("instagram.com", "Instagram"),
    ("cdninstagram.com", "Instagram"),
    ("threads.net", "Threads"),
    ("whatsapp.com", "WhatsApp"),
    ("whatsapp.net", "WhatsApp"),
    ("wa.me", "WhatsApp"),
    ("chat-e2ee-mini.facebook.com", "WhatsApp"),
    ("cdn.whatsapp.net", "WhatsAppFiles"),
    ("fna.whatsapp.net", "WhatsAppFiles"),
    ("mmg.whatsapp.net", "WhatsAppFiles"),
    ("mms.whatsapp.net", "WhatsAppFiles"),
    // Microsoft.
    ("microsoft.com", "Microsoft"),
    ("msn.com", "Microsoft"),
    ("msedge.net", "Microsoft"),
    ("msocdn.com", "Microsoft"),
    ("onmicrosoft.com", "Microsoft"),
    ("microsoftapp.net", "Microsoft"),
    ("s-microsoft.com", "Microsoft"),
    ("msftconnecttest.com", "Microsoft"),
    ("msftncsi.com", "Microsoft"),
    ("msftstatic.com", "Microsoft"),
    ("appcenter.ms", "Microsoft"),
    ("sharepointonline.com", "Microsoft"),
    ("img-s-msn-com.akamaized.net", "Microsoft"),
    ("live.com", "Microsoft"),
    ("windows.com", "Microsoft"),
    ("bing.com", "Microsoft"),
    ("office.com", "Microsoft365"),
    ("office.net", "Microsoft365"),
    ("office365.com", "Microsoft365"),
    ("officeapps.live.com", "Microsoft365"),
    ("office.live.com", "Microsoft365"),
    ("onenote.com", "Microsoft365"),
    ("microsoftonline.com", "Microsoft365"),
    ("microsoftonline-p.com", "Microsoft365"),
    ("login.live.com", "Microsoft365"),
    ("account.live.com", "Microsoft365"),
    ("msauth.net", "Microsoft365"),
    ("msftauth.net", "Microsoft365"),
    ("msecnd.net", "Microsoft365"),
    ("aadrm.com", "Microsoft365"),
    ("cloud.microsoft", "Microsoft365"),
    ("outlook.com", "Outlook"),
    ("hotmail.com", "Outlook"),
    ("outlook.office.com", "Outlook"),
    ("outlook.office365.com", "Outlook"),
    ("outlook.cloud.microsoft", "Outlook"),
    ("smtp.office365.com", "Outlook"),
    ("teams.microsoft.com", "Teams"),
    ("teams.live.com", "Teams"),
    ("teams.cloud.microsoft", "Teams"),
    ("teams-ring.msedge.net", "Teams"),
    ("lync.com", "Teams"),
    ("skype.com", "Teams"),
    ("skypeassets.com", "Teams"),
    ("onedrive.com", "MS_OneDrive"),
    ("onedrive.live.com", "MS_OneDrive"),
    ("storage.live.com", "MS_OneDrive"),
    ("g.live.com", "MS_OneDrive"),
    ("sharepoint.com", "MS_OneDrive"),
    ("1drv.com", "MS_OneDrive"),
    ("1drv.ms", "MS_OneDrive"),
    ("svc.ms", "MS_OneDrive"),
    ("azure.com", "Azure"),
    ("azure.net", "Azure"),
    ("azurefd.net", "Azure"),
    ("azurefd.us", "Azure"),
    ("azureedge.net", "Azure"),
    ("azurewebsites.net", "Azure"),
    ("cloudapp.net", "Azure"),
    ("trafficmanager.net", "Azure"),
    ("windows.net", "Azure"),
    ("xbox.com", "Xbox"),
    ("xboxlive.com", "Xbox"),
    ("xboxservices.com", "Xbox"),
    ("xboxab.com", "Xbox"),
    ("windowsupdate.com", "WindowsUpdate"),
    ("update.microsoft.com", "WindowsUpdate"),
    ("mp.microsoft.com", "WindowsUpdate"),
    ("emdl.ws.microsoft.com", "WindowsUpdate"),
    ("ntservicepack.microsoft.com", "WindowsUpdate"),
    ("wustat.windows.com", "WindowsUpdate"),
    ("ocsp.msocsp.com", "OCSP"),
    // Apple.
    ("apple.com", "Apple"),
    ("apple", "Apple"),
    ("apple.news", "Apple"),
    ("apple-dns.net", "Apple"),
    ("apple-cloudkit.com", "Apple"),
    ("mzstatic.com", "Apple"),
    ("aaplimg.com", "Apple"),
    ("cdn-apple.com", "Apple"),
    ("ls-apple.com", "Apple"),
    ("ls4-apple.com", "Apple"),
    ("gc-apple.com", "Apple"),
    ("icloud.com", "AppleiCloud"),
    ("me.com", "AppleiCloud"),
    ("icloud-content.com", "AppleiCloud"),
    ("mask.icloud.com", "iCloudPrivateRelay"),
    ("mask-h2.icloud.com", "iCloudPrivateRelay"),
    ("mask-api.icloud.com", "iCloudPrivateRelay"),
    ("push.apple.com", "ApplePush"),
    ("push-apple.com", "ApplePush"),
    ("itunes.apple.com", "AppleiTunes"),
    ("tlnk.io", "AppleiTunes"),
    ("buy.itunes.apple.com", "AppleStore"),
    ("iosapps.itunes.apple.com", "AppleStore"),
    ("osxapps.itunes.apple.com", "AppleStore"),
    ("su.itunes.apple.com", "AppleStore"),
    ("se.itunes.apple.com", "AppleStore"),
    ("myapp.itunes.apple.com", "AppleStore"),
    ("swscan.apple.com", "AppleStore"),
    ("itunes-apple.com", "AppleStore"),
    ("guzzoni.apple.com", "AppleSiri"),
    ("tv.apple.com", "AppleTVPlus"),
    ("tv.g.apple.com", "AppleTVPlus"),
    ("tv.v.aaplimg.com", "AppleTVPlus"),
    ("ocsp.apple.com", "OCSP"),
    ("ocsp2.apple.com", "OCSP"),
    // Amazon.
    ("amazon.com", "Amazon"),
    ("amazon.ca", "Amazon"),
    ("amazon.cn", "Amazon"),
    ("amazon.co.jp", "Amazon"),
    ("amazon.co.uk", "Amazon"),
    ("amazon.com.au", "Amazon"),
    ("amazon.com.br", "Amazon"),
    ("amazon.com.mx", "Amazon"),
    ("amazon.de", "Amazon"),
    ("amazon.es", "Amazon"),
    ("amazon.fr", "Amazon"),
    ("amazon.in", "Amazon"),
    ("amazon.it", "Amazon"),
    ("amazon.nl", "Amazon"),
    ("images-amazon.com", "Amazon"),
    ("ssl-images-amazon.com", "Amazon"),
    ("media-amazon.com", "Amazon"),
    ("amazon-adsystem.com", "Amazon"),
    ("a2z.com", "Amazon"),
    ("amazonaws.com", "AmazonAWS"),
    ("aws.a2z.com", "AmazonAWS"),
    ("aws.amazon.com", "AmazonAWS"),
    ("awsstatic.com", "AmazonAWS"),
    ("primevideo.com", "AmazonVideo"),
    ("amazonvideo.com", "AmazonVideo"),
    ("aiv-cdn.net", "AmazonVideo"),
    ("aiv-delivery.net", "AmazonVideo"),
    ("pv-cdn.net", "AmazonVideo"),
    ("atv-ext.amazon.com", "AmazonVideo"),
    ("atv-ps.amazon.com", "AmazonVideo"),
    ("alexa.amazon.com", "AmazonAlexa"),
    ("amazonalexa.com", "AmazonAlexa"),
    // CDNs and hosting.
    ("cloudflare.com", "Cloudflare"),
    ("cf-ipfs.com", "Cloudflare"),
    ("cloudflareclient.com", "CloudflareWarp"),
    ("akamai.com", "Akamai"),
    ("akamai.net", "Akamai"),
    ("akamaiedge.net", "Akamai"),
    ("akamaihd.net", "Akamai"),
    ("akamaized.net", "Akamai"),
    ("akamaitechnologies.com", "Akamai"),
    ("akadns.net", "Akamai"),
    ("edgekey.net", "Akamai"),
    ("edgesuite.net", "Akamai"),
    ("cachefly.com", "Cachefly"),
    ("cachefly.net", "Cachefly"),
    ("digitalocean.com", "DigitalOcean"),
    // Social networks.
    ("twitter.com", "Twitter"),
    ("twimg.com", "Twitter"),
    ("twttr.com", "Twitter"),
    ("t.co", "Twitter"),
    ("x.com", "Twitter"),
    ("linkedin.com", "LinkedIn"),
    ("licdn.com", "LinkedIn"),
    ("tiktok.com", "TikTok"),
    ("tiktokv.com", "TikTok"),
    ("tiktokv.us", "TikTok"),
    ("tiktokv.eu", "TikTok"),
    ("tiktokcdn.com", "TikTok"),
    ("tiktokcdn-us.com", "TikTok"),
    ("tiktokcdn-eu.com", "TikTok"),
    ("tik-tokcdn.com", "TikTok"),
    ("p16-tiktokcdn-com.akamaized.net", "TikTok"),
    ("musical.ly", "TikTok"),
    ("muscdn.com", "TikTok"),
    ("musemuse.cn", "TikTok"),
    ("byteoversea.com", "TikTok"),
    ("ibyteimg.com", "TikTok"),
    ("byteicdn.com", "TikTok"),
    ("bytecdn.cn", "TikTok"),
    ("byted.org", "TikTok"),
    ("snapchat.com", "Snapchat"),
    ("snapads.com", "Snapchat"),
    ("feelinsonice.com", "Snapchat"),
    ("sc-cdn.net", "Snapchat"),
    ("sc-prod.net", "Snapchat"),
    ("sc-static.net", "Snapchat"),
    ("sc-jpl.com", "Snapchat"),
    ("addlive.io", "Snapchat"),
    ("reddit.com", "Reddit"),
    ("redd.it", "Reddit"),
    ("redditmedia.com", "Reddit"),
    ("redditstatic.com", "Reddit"),
    ("tumblr.com", "Tumblr"),
    ("pinterest.com", "Pinterest"),
    ("pinterest.co.uk", "Pinterest"),
    ("pinterest.de", "Pinterest"),
    ("pinterest.fr", "Pinterest"),
    ("pinimg.com", "Pinterest"),
    ("vk.com", "VK"),
    ("vk-cdn.net", "VK"),
    ("vk-portal.net", "VK"),
    ("vkuser.net", "VK"),
    ("vkuseraudio.net", "VK"),
    ("vkuservideo.net", "VK"),
    ("vkvideo.ru", "VK"),
    ("userapi.com", "VK"),
    ("badoo.com", "Badoo"),
    ("badoo.app", "Badoo"),
    ("badoocdn.com", "Badoo"),
    ("like.video", "Likee"),
    ("likee.video", "Likee"),
    ("likee.com", "Likee"),
    ("likeevideo.com", "Likee"),
    ("bsky.app", "Bluesky"),
    ("bsky.social", "Bluesky"),
    ("bsky.network", "Bluesky"),
    ("mastodon.social", "Mastodon"),
    // Chat, calls and meetings.
    ("telegram.org", "Telegram"),
    ("telegram.me", "Telegram"),
    ("t.me", "Telegram"),
    ("cdn-telegram.org", "Telegram"),
    ("tdesktop.com", "Telegram"),
    ("tupdate.com", "Telegram"),
    ("signal.org", "Signal"),
    ("whispersystems.org", "Signal"),
    ("signal.art", "Signal"),
    ("signal.group", "Signal"),
    ("signal.link", "Signal"),
    ("signal.me", "Signal"),
    ("signal.tube", "Signal"),
    ("threema.ch", "Threema"),
    ("viber.com", "Viber"),
    ("viber.it", "Viber"),
    ("line.me", "Line"),
    ("line-apps.com", "Line"),
    ("line-scdn.net", "Line"),
    ("line-website.com", "Line"),
    ("linecorp.com", "Line"),
    ("line.naver.jp", "Line"),
    ("kakao.com", "KakaoTalk"),
    ("discord.com", "Discord"),
    ("discord.gg", "Discord"),
    ("discord.media", "Discord"),
    ("discordapp.com", "Discord"),
    ("discordapp.net", "Discord"),
    ("slack.com", "Slack"),
    ("slackb.com", "Slack"),
    ("slack-edge.com", "Slack"),
    ("slack-core.com", "Slack"),
    ("slack-files.com", "Slack"),
    ("slack-imgs.com", "Slack"),
    ("slack-msgs.com", "Slack"),
    ("slack-redir.net", "Slack"),
    ("zoom.us", "Zoom"),
    ("zoom.com", "Zoom"),
    ("webex.com", "Webex"),
    ("webexcontent.com", "Webex"),
    ("wbx2.com", "Webex"),
    ("goto.com", "GoTo"),
    ("gotomeeting.com", "GoTo"),
    ("gotowebinar.com", "GoTo"),
    ("goto-rtc.com", "GoTo"),
    ("getgo.com", "GoTo"),
    ("getgocdn.com", "GoTo"),
    ("logmeininc.com", "GoTo"),
    ("fuze.com", "Fuze"),
    ("fuzemeeting.com", "Fuze"),
    ("adobeconnect.com", "AdobeConnect"),
    ("dingtalk.com", "DingTalk"),
    ("paltalk.com", "Paltalk"),
    ("vivox.com", "Vivox"),
    // Video and music streaming.
    ("netflix.com", "NetFlix"),
    ("netflix.net", "NetFlix"),
    ("nflxext.com", "NetFlix"),
    ("nflximg.com", "NetFlix"),
    ("nflximg.net", "NetFlix"),
    ("nflxso.net", "NetFlix"),
    ("nflxvideo.net", "NetFlix"),
    ("fast.com", "NetFlix"),
    ("disneyplus.com", "DisneyPlus"),
    ("disneyplus.net", "DisneyPlus"),
    ("disney-plus.com", "DisneyPlus"),
    ("disney-plus.net", "DisneyPlus"),
    ("dssott.com", "DisneyPlus"),
    ("dssott.com.akamaized.net", "DisneyPlus"),
    ("bamgrid.com", "DisneyPlus"),
    ("go.com", "DisneyPlus"),
    ("hulu.com", "Hulu"),
    ("hulustream.com", "Hulu"),
    ("huluim.com", "Hulu"),
    ("huluad.com", "Hulu"),
    ("assetshuluimcom-a.akamaihd.net", "Hulu"),
    ("ibhuluimcom-a.akamaihd.net", "Hulu"),
    ("hbo.com", "HBO"),
    ("hbomax.com", "HBO"),
    ("hbomaxcdn.com", "HBO"),
    ("hbonow.com", "HBO"),
    ("hbogo.com", "HBO"),
    ("hbogo.eu", "HBO"),
    ("hbogoasia.com", "HBO"),
    ("max.com", "HBO"),
    ("discomax.com", "HBO"),
    ("h264.io", "HBO"),
    ("paramountplus.com", "ParamountPlus"),
    ("paramount.com", "ParamountPlus"),
    ("pplusstatic.com", "ParamountPlus"),
    ("cbsi.com", "ParamountPlus"),
    ("cbsstatic.com", "ParamountPlus"),
    ("cbsaavideo.com", "ParamountPlus"),
    ("vimeo.com", "Vimeo"),
    ("vimeocdn.com", "Vimeo"),
    ("dailymotion.com", "Dailymotion"),
    ("dai.ly", "Dailymotion"),
    ("dmcdn.net", "Dailymotion"),
    ("dmxleo.com", "Dailymotion"),
    ("twitch.tv", "Twitch"),
    ("ttvnw.net", "Twitch"),
    ("jtvnw.net", "Twitch"),
    ("twitchcdn.net", "Twitch"),
    ("twitchsvc.net", "Twitch"),
    ("live-video.net", "Twitch"),
    ("kick.com", "Kick"),
    ("rumble.com", "Rumble"),
    ("rutube.ru", "RUTUBE"),
    ("dazn.com", "Dazn"),
    ("indazn.com", "Dazn"),
    ("dazn-api.com", "Dazn"),
    ("daznedge.net", "Dazn"),
    ("dcavoddazn.akamaized.net", "Dazn"),
    ("espn.com", "Espn"),
    ("espn.net", "Espn"),
    ("espncdn.com", "Espn"),
    ("espn.api.edge.bamgrid.com", "Espn"),
    ("espn.connections.edge.bamgrid.com", "Espn"),
    ("espn.playback.edge.bamgrid.com", "Espn"),
    ("directv.com", "DirecTV"),
    ("directvnow.com", "DirecTV"),
    ("vudu.com", "Vudu"),
    ("showtime.com", "Showtime"),
    ("livestream.com", "Livestream"),
    ("iqiyi.com", "iQIYI"),
    ("iqiyipic.com", "iQIYI"),
    ("iq.com", "iQIYI"),
    ("qy.net", "iQIYI"),
    ("pps.tv", "iQIYI"),
    ("iflix.com", "IFLIX"),
    ("1kxun.com", "1kxun"),
    ("1kxun.mobi", "1kxun"),
    ("pluralsight.com", "Pluralsight"),
    ("pluralsight.imgix.net", "Pluralsight"),
    ("pluralsight2.imgix.net", "Pluralsight"),
    ("spotify.com", "Spotify"),
    ("scdn.co", "Spotify"),
    ("pscdn.co", "Spotify"),
    ("spotifycdn.com", "Spotify"),
    ("spotifycdn.net", "Spotify"),
    ("spotilocal.com", "Spotify"),
    ("audio-ak-spotify-com.akamaized.net", "Spotify"),
    ("audio4-ak-spotify-com.akamaized.net", "Spotify"),
    ("heads-ak-spotify-com.akamaized.net", "Spotify"),
    ("spotify-com.akamaized.net", "Spotify"),
    ("deezer.com", "Deezer"),
    ("dzcdn.net", "Deezer"),
    ("soundcloud.com", "SoundCloud"),
    ("sndcdn.com", "SoundCloud"),
    ("last.fm", "LastFM"),
    ("pandora.com", "Pandora"),
    ("tidal.com", "Tidal"),
    ("tunein.com", "TuneIn"),
    ("radiotime.com", "TuneIn"),
    ("iheart.com", "IHeartRadio"),
    ("iheartradio.com", "IHeartRadio"),
    ("siriusxm.com", "SiriusXMRadio"),
    ("siriusxm.ca", "SiriusXMRadio"),
    ("sonos.com", "Sonos"),
    // Collaboration, storage and developer services.
    ("dropbox.com", "Dropbox"),
    ("dropboxapi.com", "Dropbox"),
    ("dropboxstatic.com", "Dropbox"),
    ("dropboxusercontent.com", "Dropbox"),
    ("dropbox-dns.com", "Dropbox"),
    ("getdropbox.com", "Dropbox"),
    ("github.com", "Github"),
    ("github.io", "Github"),
    ("github.dev", "Github"),
    ("githubassets.com", "Github"),
    ("githubusercontent.com", "Github"),
    ("gitlab.com", "GitLab"),
    ("gitlab.io", "GitLab"),
    ("gitlab.net", "GitLab"),
    ("gitlab-static.net", "GitLab"),
    ("salesforce.com", "Salesforce"),
    ("force.com", "Salesforce"),
    ("salesforceliveagent.com", "Salesforce"),
    ("crashlytics.com", "Crashlytics"),
    ("bloomberg.com", "Bloomberg"),
    ("bloombergvault.com", "Bloomberg"),
    ("clickhouse.com", "ClickHouse"),
    ("clickhouse.cloud", "ClickHouse"),
    ("citrix.com", "Citrix"),
    ("ubuntu.com", "Canonical"),
    ("snapcraft.io", "Canonical"),
    ("snapcraftcontent.com", "Canonical"),
    ("launchpad.net", "Canonical"),
    ("launchpadcontent.net", "Canonical"),
    ("mozilla.com", "Mozilla"),
    ("mozilla.net", "Mozilla"),
    ("mozilla.org", "Mozilla"),
    ("mozgcp.net", "Mozilla"),
    ("firefox.com", "Mozilla"),
    ("pastebin.com", "Pastebin"),
    ("wikipedia.org", "Wikipedia"),
    ("wikimedia.org", "Wikipedia"),
    ("wikimediafoundation.org", "Wikipedia"),
    ("mediawiki.org", "Wikipedia"),
    ("ntop.org", "ntop"),
    // Remote access and VPNs.
    ("teamviewer.com", "TeamViewer"),
    ("anydesk.com", "AnyDesk"),
    ("secure.logmein.com", "Hamachi"),
    ("tunnelbear.com", "TunnelBear"),
    ("polargrizzly.com", "TunnelBear"),
    ("nordvpn.com", "NordVPN"),
    ("nordcdn.com", "NordVPN"),
    ("nordsec.com", "NordVPN"),
    ("nordaccount.com", "NordVPN"),
    ("napps-1.com", "NordVPN"),
    ("napps-2.com", "NordVPN"),
    ("surfshark.com", "SurfShark"),
    ("mullvad.net", "Mullvad"),
    ("protonvpn.com", "ProtonVPN"),
    ("protonvpn.net", "ProtonVPN"),
    ("vpn-api.proton.me", "ProtonVPN"),
    ("proton.me", "Proton"),
    ("mail.proton.me", "ProtonMail"),
    ("mail-api.proton.me", "ProtonMail"),
    ("protonmail.com", "ProtonMail"),
    ("protonmail.ch", "ProtonMail"),
    ("pm.me", "ProtonMail"),
    ("drive.proton.me", "ProtonDrive"),
    ("drive-api.proton.me", "ProtonDrive"),
    ("pass.proton.me", "ProtonPass"),
    ("pass-api.proton.me", "ProtonPass"),
    ("privateinternetaccess.com", "PrivateInternetAccess"),
    ("windscribe.com", "Windscribe"),
    ("cactusvpn.com", "CactusVPN"),
    ("hotspotshield.com", "HotspotShield"),
    ("anchorfree.com", "HotspotShield"),
    ("anchorfree.net", "HotspotShield"),
    ("northghost.com", "HotspotShield"),
    ("sec-tunnel.com", "OperaVPN"),
    ("psiphon3.net", "Psiphon"),
    ("softether.org", "Softether"),
    ("softether-network.net", "Softether"),
    ("tailscale.com", "Tailscale"),
    ("torproject.org", "Tor"),
    ("lagofast.com", "LagoFast"),
    ("gearupportal.com", "GearUP_Booster"),
    ("discovery.syncthing.net", "Syncthing"),
    ("bootstrap.libp2p.io", "libp2p"),
    // Games.
    ("steampowered.com", "Steam"),
    ("steamcommunity.com", "Steam"),
    ("steamcontent.com", "Steam"),
    ("steamstatic.com", "Steam"),
    ("steamserver.net", "Steam"),
    ("steamcommunity-a.akamaihd.net", "Steam"),
    ("dota2.com", "Dota2"),
    ("playstation.com", "Playstation"),
    ("playstation.net", "Playstation"),
    ("sonyentertainmentnetwork.com", "Playstation"),
    ("nintendo.com", "Nintendo"),
    ("nintendo.net", "Nintendo"),
    ("epicgames.com", "EpicGames"),
    ("epicgames.net", "EpicGames"),
    ("epicgames.dev", "EpicGames"),
    ("unrealengine.com", "EpicGames"),
    ("fortnite.com", "EpicGames"),
    ("battle.net", "Blizzard"),
    ("blizzard.com", "Blizzard"),
    ("blzstatic.com", "Blizzard"),
    ("starcraft2.com", "Blizzard"),
    ("worldofwarcraft.com", "WorldOfWarcraft"),
    ("activision.com", "Activision"),
    ("codmwest.com", "CoD_Mobile"),
    ("ea.com", "ElectronicArts"),
    ("origin-a.akamaihd.net", "ElectronicArts"),
    ("riotgames.com", "RiotGames"),
    ("riotcdn.net", "RiotGames"),
    ("pvp.net", "RiotGames"),
    ("roblox.com", "Roblox"),
    ("rbxcdn.com", "Roblox"),
    ("rockstargames.com", "RockstarGames"),
    ("rsg.sc", "RockstarGames"),
    ("nexon.com", "Nexon"),
    ("nexon.io", "Nexon"),
    ("gaijin.net", "GaijinEntertainment"),
    ("gaijinent.com", "GaijinEntertainment"),
    ("crossout.net", "GaijinEntertainment"),
    ("warthunder.com", "GaijinEntertainment"),
    ("easebar.com", "NetEaseGames"),
    ("pathofexile.com", "PathofExile"),
    ("elderscrollsonline.com", "TES_Online"),
    ("ankama.com", "Dofus"),
    ("ankama-games.com", "Dofus"),
    ("blacknut.com", "Blacknut"),
    ("boosteroid.com", "Boosteroid"),
    ("nvidia.com", "Nvidia"),
    ("nvidiagrid.net", "GeForceNow"),
    ("geforcenow.com", "GeForceNow"),
    ("geforce.com", "GeForceNow"),
    ("gfe.nvidia.com", "GeForceNow"),
    // Chinese, Korean and Russian services.
    ("qq.com", "QQ"),
    ("gtimg.com", "QQ"),
    ("v.qq.com", "Tencentvideo"),
    ("tencent.com", "Tencent"),
    ("tencentcloud.com", "Tencent"),
    ("qcloud.com", "Tencent"),
    ("myqcloud.com", "Tencent"),
    ("tiktokcdn.liveplay.myqcloud.com", "TikTok"),
    ("wechat.com", "WeChat"),
    ("wechat.org", "WeChat"),
    ("wechatapp.com", "WeChat"),
    ("we.chat", "WeChat"),
    ("weixin.qq.com", "WeChat"),
    ("mmsns.qpic.cn", "WeChat"),
    ("weibo.com", "SinaWeibo"),
    ("weibo.cn", "SinaWeibo"),
    ("sina.cn", "Sina"),
    ("sina.com.cn", "Sina"),
    ("sinaimg.cn", "Sina"),
    ("sinajs.cn", "Sina"),
    ("alibaba.com", "Alibaba"),
    ("alicdn.com", "Alibaba"),
    ("aliyuncs.com", "Alibaba"),
    ("aliapp.org", "Alibaba"),
    ("mmstat.com", "Alibaba"),
    ("alibabausercontent.com", "Alibaba"),
    ("alipay.com", "Alibaba"),
    ("alipayobjects.com", "Alibaba"),
    ("aliexpress.com", "Alibaba"),
    ("aliexpress-media.com", "Alibaba"),
    ("aliyun.com", "AliCloud"),
    ("alibabacloud.com", "AliCloud"),
    ("taobao.com", "Taobao"),
    ("tmall.com", "Taobao"),
    ("xiaomi.com", "Xiaomi"),
    ("xiaomi.net", "Xiaomi"),
    ("mi.com", "Xiaomi"),
    ("miui.com", "Xiaomi"),
    ("huawei.com", "Huawei"),
    ("cloud.huawei.com", "HuaweiCloud"),
    ("hicloud.com", "HuaweiCloud"),
    ("huaweicloud.com", "HuaweiCloud"),
    ("myhuaweicloud.com", "HuaweiCloud"),
    ("dbankcloud.com", "HuaweiCloud"),
    ("dbankcloud.cn", "HuaweiCloud"),
    ("dbankcdn.com", "HuaweiCloud"),
    ("naver.com", "Naver"),
    ("naver.net", "Naver"),
    ("pstatic.net", "Naver"),
    ("yandex.ru", "Yandex"),
    ("yandex.com", "Yandex"),
    ("yandex.net", "Yandex"),
    ("yandex.by", "Yandex"),
    ("yandex.kz", "Yandex"),
    ("yandex.ua", "Yandex"),
    ("yandex.com.tr", "Yandex"),
    ("yastatic.net", "Yandex"),
    ("mail.yandex.ru", "YandexMail"),
    ("mail.yandex.com", "YandexMail"),
    ("music.yandex.ru", "YandexMusic"),
    ("music.yandex.com", "YandexMusic"),
    ("disk.yandex.ru", "YandexDisk"),
    ("disk.yandex.com", "YandexDisk"),
    ("cloud.yandex.ru", "YandexCloud"),
    ("cloud.yandex.com", "YandexCloud"),
    ("market.yandex.ru", "YandexMarket"),
    ("metrika.yandex.ru", "YandexMetrika"),
    ("appmetrika.yandex.ru", "YandexMetrika"),
    ("direct.yandex.ru", "YandexDirect"),
    ("alice.yandex.ru", "YandexAlice"),
    // Shopping, news, weather and other web services.
    ("ebay.com", "eBay"),
    ("ebay.co.uk", "eBay"),
    ("ebay.de", "eBay"),
    ("ebaystatic.com", "eBay"),
    ("ebayimg.com", "eBay"),
    ("ebaydesc.com", "eBay"),
    ("ebayrtm.com", "eBay"),
    ("shein.com", "Shein"),
    ("ltwebstatic.com", "Shein"),
    ("temu.com", "Temu"),
    ("kwcdn.com", "Temu"),
    ("cnn.com", "CNN"),
    ("cnn.net", "CNN"),
    ("yahoo.com", "Yahoo"),
    ("yahoo.net", "Yahoo"),
    ("yahoo.co.jp", "Yahoo"),
    ("yahooapis.com", "Yahoo"),
    ("yimg.com", "Yahoo"),
    ("yimg.jp", "Yahoo"),
    ("accuweather.com", "AccuWeather"),
    ("tesla.services", "TeslaServices"),
    ("ui.com", "Ubiquity"),
    ("ubnt.com", "Ubiquity"),
    ("speedtest.net", "Ookla"),
    ("ooklaserver.net", "Ookla"),
    ("cdnst.net", "Ookla"),
    ("opendns.com", "OpenDNS"),
    ("dnscrypt.org", "DNScrypt"),
    ("simplednscrypt.org", "DNScrypt"),
    ("utorrent.com", "BitTorrent"),
    ("bittorrent.com", "BitTorrent"),
    // Certificate status.
    ("ocsp.digicert.com", "OCSP"),
    ("ocsp.godaddy.com", "OCSP"),
    ("ocsp.sectigo.com", "OCSP"),
    ("ocsp.quovadisglobal.com", "OCSP"),
    ("ocsp.pki.goog", "OCSP"),
    // Security vendors and reputation services.
    ("abuse.ch", "Cybersec"),
    ("avast.com", "Cybersec"),
    ("avcdn.net", "Cybersec"),
    ("avira.com", "Cybersec"),
    ("barracuda.com", "Cybersec"),
    ("bitdefender.net", "Cybersec"),
    ("checkpoint.com", "Cybersec"),
    ("cleanbrowsing.org", "Cybersec"),
    ("crowdstrike.com", "Cybersec"),
    ("eset.com", "Cybersec"),
    ("f-secure.com", "Cybersec"),
    ("fortinet.com", "Cybersec"),
    ("kaspersky.com", "Cybersec"),
    ("kaspersky-labs.com", "Cybersec"),
    ("malwarebytes.com", "Cybersec"),
    ("mcafee.com", "Cybersec"),
    ("norton.com", "Cybersec"),
    ("paloaltonetworks.com", "Cybersec"),
    ("rapid7.com", "Cybersec"),
    ("sentinelone.com", "Cybersec"),
    ("sentinelone.net", "Cybersec"),
    ("sonicwall.com", "Cybersec"),
    ("sophos.com", "Cybersec"),
    ("sophosxl.net", "Cybersec"),
    ("spamcop.net", "Cybersec"),
    ("spamhaus.org", "Cybersec"),
    ("surbl.org", "Cybersec"),
    ("symantec.com", "Cybersec"),
    ("trendmicro.com", "Cybersec"),
    // Advertising, analytics and tracking.
    ("adcolony.com", "ADS_Analytic_Track"),
    ("adform.net", "ADS_Analytic_Track"),
    ("adjust.com", "ADS_Analytic_Track"),
    ("adjust.io", "ADS_Analytic_Track"),
    ("adnxs.com", "ADS_Analytic_Track"),
    ("applovin.com", "ADS_Analytic_Track"),
    ("appsflyer.com", "ADS_Analytic_Track"),
    ("appsflyersdk.com", "ADS_Analytic_Track"),
    ("chartbeat.com", "ADS_Analytic_Track"),
    ("chartbeat.net", "ADS_Analytic_Track"),
    ("criteo.com", "ADS_Analytic_Track"),
    ("criteo.net", "ADS_Analytic_Track"),
    ("flurry.com", "ADS_Analytic_Track"),
    ("hotjar.com", "ADS_Analytic_Track"),
    ("inmobi.com", "ADS_Analytic_Track"),
    ("kochava.com", "ADS_Analytic_Track"),
    ("mixpanel.com", "ADS_Analytic_Track"),
    ("moloco.com", "ADS_Analytic_Track"),
    ("mopub.com", "ADS_Analytic_Track"),
    ("newrelic.com", "ADS_Analytic_Track"),
    ("openx.net", "ADS_Analytic_Track"),
    ("pubmatic.com", "ADS_Analytic_Track"),
    ("rubiconproject.com", "ADS_Analytic_Track"),
    ("scorecardresearch.com", "ADS_Analytic_Track"),
    ("smaato.net", "ADS_Analytic_Track"),
    ("taboola.com", "ADS_Analytic_Track"),
    ("vungle.com", "ADS_Analytic_Track"),
    // DNS over HTTPS / TLS resolvers.
    ("dns.google", "DoH_DoT"),
    ("dns.google.com", "DoH_DoT"),
    ("cloudflare-dns.com", "DoH_DoT"),
    ("dns.cloudflare.com", "DoH_DoT"),
    ("one.one.one.one", "DoH_DoT"),
    ("dns.quad9.net", "DoH_DoT"),
    ("dns9.quad9.net", "DoH_DoT"),
    ("dns10.quad9.net", "DoH_DoT"),
    ("dns11.quad9.net", "DoH_DoT"),
    ("doh.opendns.com", "DoH_DoT"),
    ("dns.adguard.com", "DoH_DoT"),
    ("dns-family.adguard.com", "DoH_DoT"),
    ("dns.nextdns.io", "DoH_DoT"),
    ("doh.cleanbrowsing.org", "DoH_DoT"),
    ("doh.dns.sb", "DoH_DoT"),
    ("commons.host", "DoH_DoT"),
    ("doh.libredns.gr", "DoH_DoT"),
    ("doh.powerdns.org", "DoH_DoT"),
    ("doh.netweaver.uk", "DoH_DoT"),
    ("dns.dns-over-https.com", "DoH_DoT"),
    ("dns.dnsoverhttps.net", "DoH_DoT"),
    ("adblock.mydns.network", "DoH_DoT"),
    ("doh.crypto.sx", "DoH_DoT"),
    ("dns.containerpi.com", "DoH_DoT"),
    ("ibksturm.synology.me", "DoH_DoT"),
    ("doh.captnemo.in", "DoH_DoT"),
    ("captnemo.in", "DoH_DoT"),
    ("dns.rubyfish.cn", "DoH_DoT"),
    ("doh.42l.fr", "DoH_DoT"),
    ("appliedprivacy.net", "DoH_DoT"),
    ("doh-ch.blahdns.com", "DoH_DoT"),
    ("doh-de.blahdns.com", "DoH_DoT"),
    ("doh-jp.blahdns.com", "DoH_DoT"),
    ("doh.seby.io", "DoH_DoT"),
    ("doh-2.seby.io", "DoH_DoT"),
    ("ibuki.cgnat.net", "DoH_DoT"),
    ("jcdns.fun", "DoH_DoT"),
    ("doh.tiar.app", "DoH_DoT"),
    ("jp.tiar.app", "DoH_DoT"),
    ("doh.tiarap.org", "DoH_DoT"),
    ("jp.tiarap.org", "DoH_DoT"),
    ("doh.dnswarden.com", "DoH_DoT"),
    ("doh.armadillodns.net", "DoH_DoT"),
    ("dns.aaflalo.me", "DoH_DoT"),
    ("dns-nyc.aaflalo.me", "DoH_DoT"),
    ("dns.aa.net.uk", "DoH_DoT"),
    ("doh.securedns.eu", "DoH_DoT"),
    ("rdns.faelix.net", "DoH_DoT"),
    ("dns.dnshome.de", "DoH_DoT"),
    ("doh.dnslify.com", "DoH_DoT"),
    ("resolver-eu.lelux.fi", "DoH_DoT"),
    ("doh.bortzmeyer.fr", "DoH_DoT"),
    ("doh.dns.snopyta.org", "DoH_DoT"),
    ("jarjar.meganerd.nl", "DoH_DoT"),
    ("rumpelsepp.org", "DoH_DoT"),
    ("dnsnl.alekberg.net", "DoH_DoT"),
    ("dnses.alekberg.net", "DoH_DoT"),
    ("dnsse.alekberg.net", "DoH_DoT"),
    ("odvr.nic.cz", "DoH_DoT"),
    ("dns.dnscrypt.ca", "DoH_DoT"),
    ("dns1.dnscrypt.ca", "DoH_DoT"),
    ("dns2.dnscrypt.ca", "DoH_DoT"),
    ("dns.digitale-gesellschaft.ch", "DoH_DoT"),
    ("dns1.digitale-gesellschaft.ch", "DoH_DoT"),
    ("doh.ffmuc.net", "DoH_DoT"),
    ("ns0.fdn.fr", "DoH_DoT"),
    ("ns1.fdn.fr", "DoH_DoT"),
];

/// The table as a map, built on first use, keyed by bytes: host names
/// are looked up as they were lowercased, with no UTF-8 check in between.
static INDEX: LazyLock<HashMap<&'static [u8], &'static str>> = LazyLock::new(|| {
    SERVICES
        .iter()
        .map(|&(suffix, service)| (suffix.as_bytes(), service))
        .collect()
});

/// The nDPI application name for a server host name, if the host is one of a known service's.
///
/// Case is ignored, as are a trailing dot and a `:port`. The host and each of its parent domains
/// are tried, longest first, so the most specific table entry wins. IP literals, empty or
/// malformed names and names longer than 253 bytes give `None`.
pub fn service_for_host(host: &str) -> Option<&'static str> {
    let mut buf = [0u8; MAX_HOST_LEN];
    let mut suffix = normalize(host.as_bytes(), &mut buf)?;
    let index = &*INDEX;
    loop {
        if let Some(&service) = index.get(suffix) {
            return Some(service);
        }
        suffix = &suffix[memchr::memchr(b'.', suffix)? + 1..];
    }
}

/// The services of the hosts one worker saw last, in front of
/// [`service_for_host`]: a flow's host is nearly always one that other flows
/// named a moment before (a page's images, an app's API calls), and the
/// table's buckets, up to one per parent domain tried, are seldom in cache
/// (4 % of the classifier's time on the realistic mix went to them). A slot
/// holds the host as seen and is a cache line; longer hosts are looked up
/// every time.
pub(crate) struct RecentHosts {
    slots: Box<[RecentHost; RECENT_HOSTS]>,
}

const RECENT_HOSTS: usize = 512;
const RECENT_HOST_LEN: usize = 47;

#[derive(Clone, Copy)]
#[repr(align(64))]
struct RecentHost {
    /// 0 for an empty slot: an empty host is never remembered.
    len: u8,
    host: [u8; RECENT_HOST_LEN],
    service: Option<&'static str>,
}

impl Default for RecentHosts {
    fn default() -> Self {
        RecentHosts {
            slots: Box::new(
                [RecentHost {
                    len: 0,
                    host: [0; RECENT_HOST_LEN],
                    service: None,
                }; RECENT_HOSTS],
            ),
        }
    }
}

impl RecentHosts {
    /// [`service_for_host`] of `host`.
    pub(crate) fn service(&mut self, host: &str) -> Option<&'static str> {
        let bytes = host.as_bytes();
        if bytes.is_empty() || bytes.len() > RECENT_HOST_LEN {
            return service_for_host(host);
        }
        let mut hasher = rustc_hash::FxHasher::default();
        bytes.hash(&mut hasher);
        let slot = &mut self.slots[hasher.finish() as usize % RECENT_HOSTS];
        if usize::from(slot.len) == bytes.len() && slot.host[..bytes.len()] == *bytes {
            return slot.service;
        }
        let service = service_for_host(host);
        slot.len = bytes.len() as u8;
        slot.host[..bytes.len()].copy_from_slice(bytes);
        slot.service = service;
        service
    }
}

/// `host` without its port and trailing dot, lowercased into `buf`.
fn normalize<'b>(host: &[u8], buf: &'b mut [u8; MAX_HOST_LEN]) -> Option<&'b [u8]> {
    if host.first() == Some(&b'[') {
        return None; // a bracketed IPv6 literal
    }
    let host = match memchr::memrchr(b':', host) {
        Some(colon) if memchr::memchr(b':', &host[..colon]).is_some() => return None, // a bare IPv6 literal
        Some(colon) if host[colon + 1..].iter().all(u8::is_ascii_digit) => &host[..colon],
        Some(_) => return None,
        None => host,
    };
    let host = host.strip_suffix(b".").unwrap_or(host);
    if host.is_empty() || host.len() > MAX_HOST_LEN {
        return None;
    }
    let out = &mut buf[..host.len()];
    for (dst, src) in out.iter_mut().zip(host) {
        *dst = src.to_ascii_lowercase();
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn recent_hosts_answer_as_the_table_does() {
        let mut recent = RecentHosts::default();
        let long = format!("{}.youtube.com", "a".repeat(RECENT_HOST_LEN));
        let hosts = [
            "www.youtube.com",
            "WWW.YouTube.COM.",
            "notyoutube.com",
            "example.org",
            "x.com",
            "api.x.com:443",
            "",
            long.as_str(),
        ];
        // Twice, so that the second round is answered from the slots; and
        // with hosts that share slots, so that a slot's host is compared,
        // not just its hash.
        for _ in 0..2 {
            for host in hosts {
                assert_eq!(recent.service(host), service_for_host(host), "{host}");
            }
        }
        // Hosts of one length under three services (and none), four to a
        // slot on average.
        let many: Vec<String> = (0..4 * RECENT_HOSTS)
            .map(|i| format!("h{:04}.{}", i, ["netflix.com", "youtube.com", "example.com"][i % 3]))
            .collect();
        for host in many.iter().chain(&many) {
            assert_eq!(recent.service(host), service_for_host(host), "{host}");
        }
        for host in hosts {
            assert_eq!(recent.service(host), service_for_host(host), "{host}");
        }
    }

    #[test]
    fn matches_the_domain_and_its_subdomains() {
        assert_eq!(service_for_host("youtube.com"), Some("YouTube"));
        assert_eq!(service_for_host("www.youtube.com"), Some("YouTube"));
        assert_eq!(service_for_host("r3---sn-a5mekn7s.googlevideo.com"), Some("YouTube"));
        assert_eq!(service_for_host("scontent-mxp1-1.cdninstagram.com"), Some("Instagram"));
    }

    #[test]
    fn matches_only_on_label_boundaries() {
        assert_eq!(service_for_host("notyoutube.com"), None);
        assert_eq!(service_for_host("youtube.com.example.net"), None);
        assert_eq!(service_for_host("outube.com"), None);
        assert_eq!(service_for_host("myx.com"), None);
        assert_eq!(service_for_host("x.com"), Some("Twitter"));
        assert_eq!(service_for_host("api.x.com"), Some("Twitter"));
    }

    #[test]
    fn ignores_case() {
        assert_eq!(service_for_host("WWW.YouTube.COM"), Some("YouTube"));
        assert_eq!(service_for_host("Mail.Google.Com"), Some("GMail"));
    }

    #[test]
    fn ignores_a_trailing_dot() {
        assert_eq!(service_for_host("www.youtube.com."), Some("YouTube"));
        assert_eq!(service_for_host("youtube.com."), Some("YouTube"));
        assert_eq!(service_for_host("www.youtube.com.."), None);
        assert_eq!(service_for_host("."), None);
    }

    #[test]
    fn ignores_a_port() {
        assert_eq!(service_for_host("www.youtube.com:443"), Some("YouTube"));
        assert_eq!(service_for_host("WWW.YOUTUBE.COM.:8080"), Some("YouTube"));
        assert_eq!(service_for_host("www.youtube.com:"), Some("YouTube"));
        assert_eq!(service_for_host("www.youtube.com:https"), None);
        assert_eq!(service_for_host(":443"), None);
    }

    #[test]
    fn ip_literals_are_unknown() {
        assert_eq!(service_for_host("142.250.180.14"), None);
        assert_eq!(service_for_host("142.250.180.14:443"), None);
        assert_eq!(service_for_host("[2a00:1450:4002::200e]:443"), None);
        assert_eq!(service_for_host("2a00:1450:4002::200e"), None);
    }

    #[test]
    fn longest_suffix_wins() {
        assert_eq!(service_for_host("google.com"), Some("Google"));
        assert_eq!(service_for_host("www.google.com"), Some("Google"));
        assert_eq!(service_for_host("mail.google.com"), Some("GMail"));
        assert_eq!(service_for_host("docs.google.com"), Some("GoogleDocs"));
        assert_eq!(service_for_host("upload.youtube.com"), Some("YouTubeUpload"));
        assert_eq!(service_for_host("a.b.upload.youtube.com"), Some("YouTubeUpload"));
        assert_eq!(service_for_host("media-mxp1-1.cdn.whatsapp.net"), Some("WhatsAppFiles"));
        assert_eq!(service_for_host("pps.whatsapp.net"), Some("WhatsApp"));
        assert_eq!(service_for_host("mozilla.cloudflare-dns.com"), Some("DoH_DoT"));
        assert_eq!(service_for_host("fbstatic-a.akamaihd.net"), Some("Facebook"));
        assert_eq!(service_for_host("a248.e.akamaihd.net"), Some("Akamai"));
    }

    #[test]
    fn the_longest_names_are_looked_up_and_longer_ones_are_not() {
        let suffix = ".youtube.com";
        let at_limit = format!("{}{suffix}", "a".repeat(MAX_HOST_LEN - suffix.len()));
        assert_eq!(at_limit.len(), MAX_HOST_LEN);
        assert_eq!(service_for_host(&at_limit), Some("YouTube"));
        assert_eq!(service_for_host(&format!("{at_limit}.")), Some("YouTube"));
        assert_eq!(service_for_host(&format!("{at_limit}:443")), Some("YouTube"));
        let over = format!("a{at_limit}");
        assert_eq!(service_for_host(&over), None);
        assert_eq!(service_for_host(&"a.".repeat(1000)), None);
    }

    #[test]
    fn unknown_hosts_give_none() {
        assert_eq!(service_for_host("example.org"), None);
        assert_eq!(service_for_host("com"), None);
        assert_eq!(service_for_host("localhost"), None);
        assert_eq!(service_for_host(""), None);
        assert_eq!(service_for_host("bücher.example"), None);
        assert_eq!(service_for_host("bücher.google.com"), Some("Google"));
    }

    #[test]
    fn the_table_is_well_formed() {
        let mut seen = HashSet::new();
        for &(suffix, service) in SERVICES {
            assert!(seen.insert(suffix), "{suffix} is listed twice");
            assert!(
                !suffix.is_empty() && suffix.len() <= MAX_HOST_LEN,
                "{suffix}: bad length"
            );
            assert!(
                suffix.split('.').all(|label| {
                    !label.is_empty()
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                }),
                "{suffix}: not a lowercase domain name"
            );
            assert!(
                !service.is_empty() && service.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                "{suffix}: {service:?} is not one label"
            );
            assert_eq!(service_for_host(suffix), Some(service), "{suffix}");
        }
        assert_eq!(INDEX.len(), SERVICES.len());
    }
}
