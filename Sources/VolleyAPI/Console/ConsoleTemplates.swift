// The console's templates, style sheet and script. Mustache: `{{name}}` is HTML-escaped; this file has no `{{{` and
// no `{{&`, so every value a page shows is escaped (ConsoleTests checks both). No inline script or style: the
// Content-Security-Policy is `default-src 'self'`.
enum ConsoleTemplates {
    static let all: [(String, String)] = [
        ("head", head), ("foot", foot), ("login", login), ("jobs", jobs), ("job", job), ("new", newJob),
        ("test-push", testPush), ("devices", devices), ("health", health), ("error", error), ("library", library),
    ]

    static let head = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} · Volley</title>
        <link rel="stylesheet" href="/console/static/console.css">
        <script src="/console/static/console.js" defer></script>
        </head>
        <body>
        <a class="skip" href="#main">Skip to the page</a>
        <header>
        <span class="brand">Volley</span>
        {{#signedIn}}
        <nav aria-label="Console">
        <a href="/console/jobs"{{#nav_jobs}} aria-current="page"{{/nav_jobs}}>Campaigns</a>
        {{#canSend}}<a href="/console/jobs/new"{{#nav_new}} aria-current="page"{{/nav_new}}>New campaign</a>
        <a href="/console/test-push"{{#nav_test_push}} aria-current="page"{{/nav_test_push}}>Test push</a>{{/canSend}}
        <a href="/console/devices"{{#nav_devices}} aria-current="page"{{/nav_devices}}>Devices</a>
        <a href="/console/library"{{#nav_library}} aria-current="page"{{/nav_library}}>Library</a>
        <a href="/console/health"{{#nav_health}} aria-current="page"{{/nav_health}}>Health</a>
        </nav>
        <form method="post" action="/console/logout" class="who">
        <span>{{org}} · {{role}} key</span>
        <input type="hidden" name="csrf" value="{{csrf}}">
        <button type="submit">Sign out</button>
        </form>
        {{/signedIn}}
        </header>
        <main id="main">
        <h1>{{title}}</h1>
        """

    static let foot = """
        </main>
        </body>
        </html>
        """

    static let error = """
        {{> head}}
        <p class="error" role="alert">{{status}}: {{detail}}{{#field}} (field <code>{{field}}</code>){{/field}}</p>
        <p><a href="/console/jobs">Back to the campaigns</a></p>
        {{> foot}}
        """

    static let login = """
        {{> head}}
        <form method="post" action="/console/login" class="card narrow">
        {{#error}}<p class="error" role="alert" id="login-error">{{error}}</p>{{/error}}
        <input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="next" value="{{next}}">
        <label for="key">API key</label>
        <input id="key" name="key" type="password" autocomplete="off" required placeholder="vk_…">
        <p class="hint">The key's org and role decide what the console shows and allows: a <code>read</code> key
        sees, a <code>send</code> or <code>admin</code> key also sends, pauses and cancels.</p>
        <button type="submit">Sign in</button>
        </form>
        {{> foot}}
        """

    static let jobs = """
        {{> head}}
        <form method="get" action="/console/jobs" class="filters">
        <label for="state">State</label>
        <select id="state" name="state"><option value="">any</option>
        {{#states}}<option value="{{name}}"{{#selected}} selected{{/selected}}>{{name}}</option>{{/states}}
        </select>
        <label for="app">App</label>
        <select id="app" name="app"><option value="">any</option>
        {{#apps}}<option value="{{name}}"{{#selected}} selected{{/selected}}>{{name}}</option>{{/apps}}
        </select>
        <button type="submit">Filter</button>
        </form>
        {{#empty}}<p>No campaigns here yet.</p>{{/empty}}
        {{^empty}}
        <table class="jobs">
        <caption>Newest first</caption>
        <thead><tr><th scope="col">Campaign</th><th scope="col">State</th><th scope="col">App</th>
        <th scope="col">Created</th><th scope="col">Due</th><th scope="col">Audience</th><th scope="col">Accepted</th>
        <th scope="col">Failed</th><th scope="col">Expired</th><th scope="col">Capped</th><th scope="col">Opened</th>
        <th scope="col">Progress</th></tr></thead>
        <tbody>
        {{#jobs}}<tr data-job="{{id}}"><td><a href="{{href}}">{{id}}</a></td><td><span class="state {{state}}">
        {{state}}</span>{{#outcome}} <span class="state {{outcome}}">{{outcome}}</span>{{/outcome}}</td>
        <td>{{app}}</td><td>{{createdAt}}</td><td>{{dueAt}}</td><td class="n">{{audience}}</td><td class="n">
        {{accepted}}</td>
        <td class="n">{{failed}}</td><td class="n">{{expired}}</td><td class="n">{{capped}}</td><td class="n">
        {{opened}}</td>
        <td>{{#hasProgress}}
        <progress value="{{progressValue}}" max="{{progressMax}}" aria-label="progress of {{id}}"></progress>
        {{/hasProgress}}</td></tr>
        {{/jobs}}
        </tbody>
        </table>
        {{/empty}}
        {{#more}}<p><a href="{{more}}">Older campaigns</a></p>{{/more}}
        {{> foot}}
        """

    static let job = """
        {{> head}}
        <section class="summary" id="job" data-job="{{id}}" data-live="{{#live}}/console/jobs/{{idPath}}/live{{/live}}">
        <p>State: <span class="state {{state}}" data-field="state">{{state}}</span>
        {{#app}} · app {{app}}{{/app}}{{#createdAt}} · created {{createdAt}}{{/createdAt}}
        {{#dueAt}} · due {{dueAt}}{{/dueAt}}</p>
        {{#outcome}}<p>Report: <span class="state {{outcome}}">{{outcome}}</span>
        {{#outcomeDetail}} · {{outcomeDetail}}{{/outcomeDetail}}</p>{{/outcome}}
        {{#reason}}<p class="error">Dead-lettered: {{reason}} {{detail}}</p>{{/reason}}
        <p><progress id="progress" value="{{progressValue}}" max="{{progressMax}}" aria-label="progress"></progress>
        <span data-field="progress"></span></p>
        {{#canSend}}
        <div class="actions">
        {{#canPause}}
        <form method="post" action="/console/jobs/{{idPath}}/pause"
         data-confirm="Pause this campaign? It sends nothing more until resumed.">
        <input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" id="pause">Pause</button></form>
        {{/canPause}}
        {{#canResume}}<form method="post" action="/console/jobs/{{idPath}}/resume" data-confirm="Resume this campaign?">
        <input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" id="resume">Resume</button></form>
        {{/canResume}}
        {{#canCancel}}
        <form method="post" action="/console/jobs/{{idPath}}/cancel"
         data-confirm="Cancel this campaign? Nothing more is sent, and it cannot be resumed.">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <button type="submit" id="cancel" class="danger">Cancel</button></form>{{/canCancel}}
        </div>
        {{/canSend}}
        </section>
        <h2>Counts</h2>
        <table class="counts">
        <thead><tr><th scope="col">Outcome</th><th scope="col">Count</th><th scope="col">Meaning</th></tr></thead>
        <tbody>
        {{#counts}}<tr><th scope="row">{{label}}</th><td class="n" data-count="{{path}}">{{value}}</td><td>{{help}}
        </td></tr>
        {{/counts}}
        </tbody>
        </table>
        <h2>Per minute</h2>
        <img id="chart" src="/console/jobs/{{idPath}}/chart.svg" width="720" height="180"
         alt="Accepted and opened pushes per minute over {{minutes}} minutes">
        <h2>Failures and rejections by reason</h2>
        {{^reasons}}<p>None.</p>{{/reasons}}
        {{#has_reasons}}<table><thead><tr><th scope="col">Reason</th><th scope="col">Count</th>
        <th scope="col">What it means, what to do</th></tr></thead><tbody>
        {{#reasons}}<tr><th scope="row"><code>{{reason}}</code></th><td class="n">{{count}}</td><td>{{advice}}</td>
        </tr>{{/reasons}}
        </tbody></table>{{/has_reasons}}
        <h2>Per platform</h2>
        {{^platforms}}<p>No device outcome yet.</p>{{/platforms}}
        {{#has_platforms}}<table><thead><tr><th scope="col">Platform</th>{{#outcomeNames}}<th scope="col">{{name}}
        </th>{{/outcomeNames}}</tr></thead><tbody>
        {{#platforms}}<tr><th scope="row">{{platform}}</th>{{#cells}}<td class="n">{{value}}</td>{{/cells}}</tr>
        {{/platforms}}
        </tbody></table>{{/has_platforms}}
        {{#has_waves}}<h2>Per local-time wave</h2>
        <table><thead><tr><th scope="col">Wave</th>{{#outcomeNames}}<th scope="col">{{name}}</th>{{/outcomeNames}}
        </tr></thead><tbody>
        {{#waves}}<tr><th scope="row">{{wave}}</th>{{#cells}}<td class="n">{{value}}</td>{{/cells}}</tr>{{/waves}}
        </tbody></table>{{/has_waves}}
        <h2>Engagement</h2>
        {{^actions}}<p>No action taps reported.</p>{{/actions}}
        {{#has_actions}}<table><thead><tr><th scope="col">Action</th><th scope="col">Taps</th></tr></thead><tbody>
        {{#actions}}<tr><th scope="row">{{action}}</th><td class="n">{{taps}}</td></tr>{{/actions}}
        </tbody></table>{{/has_actions}}
        <h2>Export</h2>
        <p><a href="/console/jobs/{{idPath}}/outcomes.csv" download>Every device's outcome (CSV)</a></p>
        {{#has_events}}<h2>Debug events</h2>
        <table><thead><tr><th scope="col">At</th><th scope="col">Event</th><th scope="col">User</th>
        <th scope="col">Platform</th><th scope="col">Status</th></tr></thead><tbody>
        {{#events}}<tr><td>{{at}}</td><td>{{event}}</td><td>{{user}}</td><td>{{platform}}</td><td>{{status}}</td>
        </tr>{{/events}}
        </tbody></table>{{/has_events}}
        {{> foot}}
        """

    static let newJob = """
        {{> head}}
        {{#error}}<p class="error" role="alert">The campaign was not sent: {{error}}</p>{{/error}}
        <form method="post" action="/console/jobs/new" class="card">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <fieldset><legend>Who</legend>
        <label for="app">App</label>
        <select id="app" name="app">{{#apps}}<option value="{{name}}"{{#selected}} selected{{/selected}}>{{name}}
        </option>{{/apps}}</select>
        {{#err_app}}<p class="field-error">{{err_app}}</p>{{/err_app}}
        <label for="users">User, group or queue ids (commas or spaces between)</label>
        <textarea id="users" name="users" rows="2">{{users}}</textarea>
        <label for="segment">Segment</label>
        <select id="segment" name="segment"><option value="">none</option>{{#segments}}
        <option value="{{name}}"{{#selected}} selected{{/selected}}>{{name}}</option>{{/segments}}</select>
        <label class="check">
        <input type="checkbox" name="everyone" id="everyone"{{#everyone}} checked{{/everyone}}>
        Everyone with the app</label>
        {{#err_audience}}<p class="field-error">{{err_audience}}</p>{{/err_audience}}
        <label for="excludeSegment">Leave out a segment</label>
        <select id="excludeSegment" name="excludeSegment"><option value="">none</option>{{#excludeSegments}}
        <option value="{{name}}"{{#selected}} selected{{/selected}}>{{name}}</option>{{/excludeSegments}}</select>
        {{#err_excludeSegment}}<p class="field-error">{{err_excludeSegment}}</p>{{/err_excludeSegment}}
        </fieldset>
        <fieldset><legend>What</legend>
        <label for="jobTitle">Title</label>
        <input id="jobTitle" name="jobTitle" value="{{jobTitle}}">
        {{#err_jobTitle}}<p class="field-error">{{err_jobTitle}}</p>{{/err_jobTitle}}
        <label for="body">Body</label>
        <textarea id="body" name="body" rows="3">{{body}}</textarea>
        {{#err_body}}<p class="field-error">{{err_body}}</p>{{/err_body}}
        <label for="data">Data (a JSON object the app receives)</label>
        <textarea id="data" name="data" rows="2">{{data}}</textarea>
        {{#err_data}}<p class="field-error">{{err_data}}</p>{{/err_data}}
        <label for="templateId">Or a template</label>
        <select id="templateId" name="templateId"><option value="">none</option>{{#templates}}
        <option value="{{name}}"{{#selected}} selected{{/selected}}>{{name}}</option>{{/templates}}</select>
        {{#err_templateId}}<p class="field-error">{{err_templateId}}</p>{{/err_templateId}}
        </fieldset>
        <fieldset><legend>Preview</legend>
        <label for="previewUser">As this user would see it (their attributes fill the template's names)</label>
        <input id="previewUser" name="previewUser" value="{{previewUser}}">
        {{#err_previewUser}}<p class="field-error">{{err_previewUser}}</p>{{/err_previewUser}}
        <button type="submit" name="action" value="preview" id="preview">Preview</button>
        {{#preview}}<section class="card result" id="preview-result" aria-live="polite">
        <h2>What {{previewFor}} would see</h2>
        <dl><dt>Title</dt><dd id="preview-title">{{previewTitle}}</dd>
        {{#previewSubtitle}}<dt>Subtitle</dt><dd>{{previewSubtitle}}</dd>{{/previewSubtitle}}
        <dt>Body</dt><dd id="preview-body">{{previewBody}}</dd></dl>
        </section>{{/preview}}
        </fieldset>
        <fieldset><legend>When and how fast</legend>
        <label for="sendAt">Send at (RFC 3339, such as 2026-12-01T09:00:00Z; empty: now)</label>
        <input id="sendAt" name="sendAt" value="{{sendAt}}">
        {{#err_sendAt}}<p class="field-error">{{err_sendAt}}</p>{{/err_sendAt}}
        <label for="localTime">At each device's local time (HH:MM)</label>
        <input id="localTime" name="localTime" value="{{localTime}}">
        {{#err_localTime}}<p class="field-error">{{err_localTime}}</p>{{/err_localTime}}
        <label for="throttle">Throttle (pushes per minute; empty: as fast as the quota allows)</label>
        <input id="throttle" name="throttle" inputmode="numeric" value="{{throttle}}">
        {{#err_throttle}}<p class="field-error">{{err_throttle}}</p>{{/err_throttle}}
        <label class="check">
        <input type="checkbox" name="bypassCap" id="bypassCap"{{#bypassCap}} checked{{/bypassCap}}>
        Ignore the org's frequency caps</label>
        <label for="jobId">Campaign id (optional; a retry with the same id is not sent twice)</label>
        <input id="jobId" name="jobId" value="{{jobId}}">
        {{#err_jobId}}<p class="field-error">{{err_jobId}}</p>{{/err_jobId}}
        </fieldset>
        <button type="submit" id="send">Send campaign</button>
        </form>
        {{> foot}}
        """

    static let testPush = """
        {{> head}}
        <p>One notification to one device, answered by the provider while you wait. It counts against this hour's
        push quota.</p>
        {{#error}}<p class="error" role="alert" id="test-error">{{error}}</p>{{/error}}
        {{#result}}<section class="card result" id="result" aria-live="polite">
        <h2>{{#accepted}}Accepted{{/accepted}}{{^accepted}}Not delivered{{/accepted}}</h2>
        <dl><dt>Status</dt><dd id="result-status">{{status}}</dd>
        <dt>Reason</dt><dd id="result-reason">{{reason}}</dd>
        <dt>Outcome</dt><dd id="result-outcome">{{outcome}}</dd>
        {{#apnsId}}<dt>apns-id</dt><dd id="result-apns-id">{{apnsId}}</dd>{{/apnsId}}
        {{#messageName}}<dt>Message</dt><dd>{{messageName}}</dd>{{/messageName}}
        {{#message}}<dt>Detail</dt><dd>{{message}}</dd>{{/message}}</dl>
        {{#advice}}<p>{{advice}}</p>{{/advice}}
        {{#removed}}<p id="result-removed">The token was removed from the registry.</p>{{/removed}}
        {{#raw}}<pre>{{raw}}</pre>{{/raw}}
        </section>{{/result}}
        <form method="get" action="/console/test-push" class="filters">
        <input type="hidden" name="app" value="{{app}}">
        <label for="search">Search devices by user id</label>
        <input id="search" name="search" value="{{search}}">
        <button type="submit">Go</button>
        </form>
        <form method="post" action="/console/test-push?app={{app}}" class="card">
        <input type="hidden" name="csrf" value="{{csrf}}">
        {{#searched}}<fieldset><legend>{{searchLabel}}</legend>
        {{#foundEmpty}}<p>No device found.</p>{{/foundEmpty}}
        {{#found}}<label class="check">
        <input type="radio" name="pick" value="{{pick}}">
        {{platform}} {{token}} · user {{user}} · registered {{registeredAt}}</label>
        {{/found}}
        </fieldset>{{/searched}}
        <label for="app-select">Connected app</label>
        <select id="app-select" name="app">{{#apps}}<option value="{{name}}"{{#selected}} selected{{/selected}}>
        {{name}}</option>{{/apps}}</select>
        {{#err_app}}<p class="field-error">{{err_app}}</p>{{/err_app}}
        <label for="platform">Platform</label>
        <select id="platform" name="platform"><option value="ios"{{#ios}} selected{{/ios}}>iOS (APNs)</option>
        <option value="android"{{#android}} selected{{/android}}>Android (FCM)</option></select>
        <label for="recipient">Recipient (connection token; or pick a device above)</label>
        <input id="recipient" name="recipient" autocomplete="off" value="">
        {{#err_recipient}}<p class="field-error">{{err_recipient}}</p>{{/err_recipient}}
        <fieldset><legend>APNs</legend>
        <label for="alert">Alert (a message, or a JSON dictionary per Apple)</label>
        <input id="alert" name="alert" value="{{alert}}">
        {{#err_alert}}<p class="field-error">{{err_alert}}</p>{{/err_alert}}
        <label for="badge">Badge (a number; 0 for none)</label>
        <input id="badge" name="badge" inputmode="numeric" value="{{badge}}">
        {{#err_badge}}<p class="field-error">{{err_badge}}</p>{{/err_badge}}
        <label for="sound">Sound (a file in the app bundle, or default)</label>
        <input id="sound" name="sound" value="{{sound}}">
        <label for="customPayload">Custom payload (JSON)</label>
        <textarea id="customPayload" name="customPayload" rows="3">{{customPayload}}</textarea>
        {{#err_customPayload}}<p class="field-error">{{err_customPayload}}</p>{{/err_customPayload}}
        <label class="check">
        <input type="checkbox" name="environment" value="sandbox"{{#sandbox}} checked{{/sandbox}}>
        Sandbox device</label>
        </fieldset>
        <fieldset><legend>FCM</legend>
        <label for="payload">Payload (JSON)</label>
        <textarea id="payload" name="payload" rows="3">{{payload}}</textarea>
        {{#err_payload}}<p class="field-error">{{err_payload}}</p>{{/err_payload}}
        <label class="check">
        <input type="checkbox" name="dryRun" id="dryRun"{{#dryRun}} checked{{/dryRun}}>
        Dry run (FCM checks it and delivers nothing)</label>
        </fieldset>
        <button type="submit" id="send">Send</button> <button type="reset">Clear</button>
        </form>
        {{> foot}}
        """

    static let devices = """
        {{> head}}
        <form method="get" action="/console/devices" class="filters">
        <label for="user">User id</label>
        <input id="user" name="user" value="{{user}}">
        <label for="suffix">or the token's last characters</label>
        <input id="suffix" name="suffix" value="{{suffix}}">
        <label for="app">App</label>
        <select id="app" name="app">{{#apps}}<option value="{{name}}"{{#selected}} selected{{/selected}}>{{name}}
        </option>{{/apps}}</select>
        <button type="submit">Show</button>
        </form>
        {{#suffixSearched}}
        <h2>Tokens ending in {{suffix}}</h2>
        {{#matchesEmpty}}<p id="no-matches">No device's token ends so.</p>{{/matchesEmpty}}
        {{#has_matches}}<table class="matches"><thead><tr><th scope="col">Platform</th><th scope="col">Token</th>
        <th scope="col">User</th><th scope="col">Environment</th><th scope="col">Registered</th>
        <th scope="col">Last seen</th></tr></thead><tbody>
        {{#matches}}<tr><td>{{platform}}</td><td><code>{{token}}</code></td>
        <td><a href="{{userHref}}">{{user}}</a></td><td>{{environment}}</td>
        <td>{{registeredAt}}</td><td>{{lastSeenAt}}</td></tr>{{/matches}}
        </tbody></table>{{/has_matches}}
        {{/suffixSearched}}
        {{#searched}}
        <h2>Devices of {{user}}</h2>
        {{#devicesEmpty}}<p id="no-devices">No device registered.</p>{{/devicesEmpty}}
        {{#has_devices}}<table class="devices"><thead><tr><th scope="col">Platform</th><th scope="col">Token</th>
        <th scope="col">Environment</th>
        <th scope="col">Registered</th><th scope="col">Last seen</th><th scope="col">Encryption key</th></tr></thead>
        <tbody>
        {{#devices}}<tr><td>{{platform}}</td><td><code>{{token}}</code></td><td>{{environment}}</td><td>
        {{registeredAt}}</td>
        <td>{{lastSeenAt}}</td><td>
        {{#keyRegistered}}registered{{/keyRegistered}}{{^keyRegistered}}none{{/keyRegistered}}</td></tr>{{/devices}}
        </tbody></table>{{/has_devices}}
        <h2>Delivery history</h2>
        {{^historyKept}}<p>Delivery histories are not kept (deliveries.days is 0).</p>{{/historyKept}}
        {{#deliveriesEmpty}}<p>Nothing delivered in the days kept.</p>{{/deliveriesEmpty}}
        {{#has_deliveries}}<table class="deliveries"><thead><tr><th scope="col">At</th><th scope="col">Campaign</th>
        <th scope="col">Platform</th>
        <th scope="col">Device</th><th scope="col">Outcome</th><th scope="col">Reason</th></tr></thead><tbody>
        {{#deliveries}}<tr><td>{{at}}</td><td><a href="{{href}}">{{job}}</a></td><td>{{platform}}</td><td><code>
        {{device}}</code></td>
        <td>{{outcome}}</td><td>{{reason}}{{#advice}} <span class="hint">{{advice}}</span>{{/advice}}</td></tr>
        {{/deliveries}}
        </tbody></table>{{/has_deliveries}}
        {{/searched}}
        {{> foot}}
        """

    static let library = """
        {{> head}}
        <p class="hint">As the <code>/v1/templates</code>, <code>/v1/segments</code>, <code>/v1/schedules</code> and
        <code>/v1/types</code> reads answer them{{#isAdmin}}; templates and segments are saved through the same checks
        as the API's PUT{{/isAdmin}}.</p>
        <h2>Templates</h2>
        {{^has_templates}}<p>None.</p>{{/has_templates}}
        {{#has_templates}}<table><thead><tr><th scope="col">Template</th><th scope="col">Updated</th>
        <th scope="col">Notification</th>{{#isAdmin}}<th scope="col">Change</th>{{/isAdmin}}</tr></thead><tbody>
        {{#templates}}<tr><th scope="row">{{id}}</th><td>{{updatedAt}}</td><td><code>{{notification}}</code></td>
        {{#isAdmin}}<td><a href="{{editHref}}">Edit</a>
        <form method="post" action="{{deleteAction}}" data-confirm="Delete this template?">
        <input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" class="danger">Delete</button></form>
        </td>{{/isAdmin}}</tr>{{/templates}}
        </tbody></table>{{/has_templates}}
        {{#isAdmin}}<form method="post" action="/console/library/templates" class="card" id="template-form">
        <h3>Save a template</h3>
        {{#templateError}}<p class="error" role="alert" id="template-error">{{templateError}}</p>{{/templateError}}
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="template-id">Template id</label>
        <input id="template-id" name="id" value="{{templateId}}">
        <label for="template-body">Body, as <code>PUT /v1/templates/{id}</code> takes it</label>
        <textarea id="template-body" name="body" rows="5">{{templateBody}}</textarea>
        <button type="submit" id="template-save">Save template</button>
        </form>{{/isAdmin}}
        <h2>Segments</h2>
        {{^has_segments}}<p>None.</p>{{/has_segments}}
        {{#has_segments}}<table><thead><tr><th scope="col">Segment</th><th scope="col">Definition</th>
        <th scope="col">Users now</th>{{#isAdmin}}<th scope="col">Change</th>{{/isAdmin}}</tr></thead><tbody>
        {{#segments}}<tr><th scope="row">{{id}}</th><td><code>{{definition}}</code></td>
        <td class="n" data-segment="{{id}}">{{#count}}{{count}}{{/count}}
        {{^count}}<a href="{{countHref}}">count</a>{{/count}}</td>{{#isAdmin}}<td><a href="{{editHref}}">Edit</a>
        <form method="post" action="{{deleteAction}}" data-confirm="Delete this segment?">
        <input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" class="danger">Delete</button></form>
        </td>{{/isAdmin}}</tr>{{/segments}}
        </tbody></table>{{/has_segments}}
        {{#isAdmin}}<form method="post" action="/console/library/segments" class="card" id="segment-form">
        <h3>Save a segment</h3>
        {{#segmentError}}<p class="error" role="alert" id="segment-error">{{segmentError}}</p>{{/segmentError}}
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="segment-id">Segment id</label>
        <input id="segment-id" name="id" value="{{segmentId}}">
        <label for="segment-body">Definition, as <code>PUT /v1/segments/{id}</code> takes it</label>
        <textarea id="segment-body" name="body" rows="4">{{segmentBody}}</textarea>
        <button type="submit" id="segment-save">Save segment</button>
        </form>{{/isAdmin}}
        <h2>Recurring schedules</h2>
        {{^has_schedules}}<p>None.</p>{{/has_schedules}}
        {{#has_schedules}}<table><thead><tr><th scope="col">Schedule</th><th scope="col">Paused</th>
        <th scope="col">Next run</th><th scope="col">Last run</th><th scope="col">Definition</th></tr></thead><tbody>
        {{#schedules}}<tr><th scope="row">{{id}}</th><td>{{#paused}}paused{{/paused}}{{^paused}}no{{/paused}}
        {{#canSend}}<form method="post" action="{{steerAction}}"><input type="hidden" name="csrf" value="{{csrf}}">
        <button type="submit">{{#paused}}Resume{{/paused}}{{^paused}}Pause{{/paused}}</button></form>{{/canSend}}</td>
        <td>{{nextRunAt}}</td><td>{{#lastRunHref}}<a href="{{lastRunHref}}">{{lastRunJob}}</a>{{/lastRunHref}}</td>
        <td><code>{{definition}}</code></td></tr>{{/schedules}}
        </tbody></table>{{/has_schedules}}
        <h2>Notification types</h2>
        {{^has_types}}<p>None.</p>{{/has_types}}
        {{#has_types}}<table><thead><tr><th scope="col">Type</th><th scope="col">Name</th><th scope="col">Mobile</th>
        <th scope="col">Desktop</th></tr></thead><tbody>
        {{#types}}<tr><th scope="row">{{id}}</th><td>{{name}}</td>
        <td>{{#mobile}}yes{{/mobile}}{{^mobile}}no{{/mobile}}</td>
        <td>{{#desktop}}yes{{/desktop}}{{^desktop}}no{{/desktop}}</td></tr>{{/types}}
        </tbody></table>{{/has_types}}
        {{> foot}}
        """

    static let health = """
        {{> head}}
        <h2>This API process</h2>
        <table><thead><tr><th scope="col">Check</th><th scope="col">State</th><th scope="col">Detail</th></tr>
        </thead><tbody>
        {{#checks}}<tr><th scope="row">{{name}}</th><td>{{#ok}}<span class="state done">ok</span>{{/ok}}{{^ok}}
        <span class="state dead-lettered">failing</span>{{/ok}}</td><td>{{detail}}</td></tr>{{/checks}}
        </tbody></table>
        <h2>This hour's push quota</h2>
        <table><thead><tr><th scope="col">Platform</th><th scope="col">Hour</th><th scope="col">Limit</th>
        <th scope="col">Used</th>
        <th scope="col">In flight</th><th scope="col">Remaining</th></tr></thead><tbody>
        {{#quota}}<tr><th scope="row">{{platform}}</th><td>{{hour}}</td><td class="n">{{limit}}</td>
        <td class="n" data-quota-used="{{platform}}">{{used}}</td>
        <td class="n">{{pending}}</td><td class="n">{{remaining}}</td></tr>{{/quota}}
        </tbody></table>
        <h2>This org's campaigns</h2>
        <table><thead><tr><th scope="col">State</th><th scope="col">Campaigns</th></tr></thead><tbody>
        {{#jobs}}<tr><th scope="row"><a href="/console/jobs?state={{state}}">{{name}}</a></th><td class="n">{{count}}
        </td></tr>{{/jobs}}
        </tbody></table>
        <p class="hint">The fleet's workers, stream lag and dead letters: <code>volley status</code> and the Grafana
        board (docs/operations.md).</p>
        {{> foot}}
        """

    static let css = """
        :root { --ink: #1b1f24; --muted: #4d5561; --line: #d0d7de; --accent: #0b5cd5; --bad: #a40e26; --ok: #116329; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: var(--ink); background: #f6f8fa; }
        a { color: var(--accent); }
        .skip { position: absolute; left: -999px; }
        .skip:focus { left: 8px; top: 8px; background: #fff; padding: 4px; }
        header { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1.2rem; background: #fff;
          border-bottom: 1px solid var(--line); flex-wrap: wrap; }
        .brand { font-weight: 700; }
        nav { display: flex; gap: 1rem; flex: 1; }
        nav a[aria-current] { font-weight: 700; text-decoration: none; color: var(--ink); }
        .who { display: flex; gap: .6rem; align-items: center; color: var(--muted); }
        main { padding: 1rem 1.2rem 3rem; max-width: 1200px; }
        h1 { font-size: 1.4rem; margin: .4rem 0 1rem; }
        h2 { font-size: 1.1rem; margin-top: 1.6rem; }
        table { border-collapse: collapse; background: #fff; width: 100%; }
        th, td { border: 1px solid var(--line); padding: .3rem .5rem; text-align: left; vertical-align: top; }
        td.n { text-align: right; font-variant-numeric: tabular-nums; }
        caption { text-align: left; color: var(--muted); padding: .2rem 0; }
        .card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 1rem; max-width: 720px; }
        .narrow { max-width: 420px; }
        label { display: block; margin-top: .6rem; font-weight: 600; }
        label.check { font-weight: 400; }
        input:not([type=checkbox]):not([type=radio]), select, textarea { width: 100%; padding: .35rem;
          border: 1px solid #8c959f; border-radius: 4px; font: inherit; }
        fieldset { border: 1px solid var(--line); margin: 1rem 0; }
        button { margin-top: .8rem; padding: .4rem .9rem; border: 1px solid var(--accent); background: var(--accent);
          color: #fff; border-radius: 4px; font: inherit; cursor: pointer; }
        button[type=reset], .who button { background: #fff; color: var(--accent); }
        button.danger { background: var(--bad); border-color: var(--bad); }
        .actions { display: flex; gap: .6rem; }
        .filters { display: flex; gap: .6rem; align-items: end; flex-wrap: wrap; margin-bottom: 1rem; }
        .filters label { margin: 0; }
        .filters input:not([type=checkbox]):not([type=radio]), .filters select { width: auto; }
        .error, .field-error { color: var(--bad); font-weight: 600; }
        .hint { color: var(--muted); font-size: .9em; }
        .state { padding: 0 .35rem; border-radius: 3px; border: 1px solid var(--line); background: #fff; }
        .state.done { color: var(--ok); } .state.dead-lettered, .state.cancelled { color: var(--bad); }
        progress { width: 10rem; }
        dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
        dt { font-weight: 600; } dd { margin: 0; }
        img#chart { max-width: 100%; height: auto; border: 1px solid var(--line); background: #fff; }
        """

    /// Confirmations on the steering forms, and the live refresh of a running campaign's page: its status every two
    /// seconds (the same answer as `GET /v1/jobs/{id}`), written into the cells that name its paths, until the job
    /// ends; then the page reloads once for the final report.
    static let js = """
        "use strict";
        document.addEventListener("submit", function (e) {
          var form = e.target;
          var question = form.getAttribute("data-confirm");
          if (question && !window.confirm(question)) { e.preventDefault(); }
        });
        function valueAt(o, path) {
          return path.split(".").reduce(function (v, k) { return v == null ? undefined : v[k]; }, o);
        }
        function done(c) {
          if (!c) { return 0; }
          return ["accepted", "rejected", "failed", "quotaExceeded", "expired", "capped", "noDevice"]
            .reduce(function (n, k) { return n + (c[k] || 0); }, 0);
        }
        function refresh(section, url) {
          fetch(url, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
            if (r.status === 303 || r.redirected) { window.location.reload(); return null; }
            return r.ok ? r.json() : null;
          }).then(function (job) {
            if (!job) { return; }
            document.querySelectorAll("[data-count]").forEach(function (cell) {
              var v = valueAt(job, cell.getAttribute("data-count"));
              cell.textContent = String(v == null ? 0 : v);
            });
            var state = section.querySelector("[data-field=state]");
            var changed = state && state.textContent !== job.state;
            if (state) { state.textContent = job.state; state.className = "state " + job.state; }
            var bar = document.getElementById("progress");
            if (bar && job.counts) {
              bar.max = Math.max(job.counts.audience || 0, done(job.counts)) || 1;
              bar.value = done(job.counts);
            }
            var chart = document.getElementById("chart");
            if (chart) { chart.src = chart.src.split("?")[0] + "?t=" + Date.now(); }
            section.setAttribute("data-refreshed", String(Date.now()));
            if (changed) { window.location.reload(); return; }
            if (["done", "cancelled", "dead-lettered"].indexOf(job.state) < 0) {
              window.setTimeout(function () { refresh(section, url); }, 2000);
            }
          });
        }
        document.addEventListener("DOMContentLoaded", function () {
          var section = document.getElementById("job");
          var url = section && section.getAttribute("data-live");
          if (url) { window.setTimeout(function () { refresh(section, url); }, 2000); }
        });
        """
}
