//! The page every HTML report shares: its head (a Content-Security-Policy that loads nothing,
//! the inline CSS with print styles) and its building blocks (preformatted text, a grid of
//! charts).

use std::fmt::Write;

use crate::svg::{Chart, esc};

const CSS: &str = r#"
:root{--fg:#1d1d1f;--muted:#5f6368;--line:#d0d4d9;--bg:#fff;--accent:#0072b2;--bad:#b3261e;--ok:#1e7b34}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;max-width:1340px;padding:16px 24px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
.meta{color:var(--muted)}
pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f6f8fa;border:1px solid var(--line);padding:10px;overflow-x:auto;white-space:pre}
table{border-collapse:collapse;margin:6px 0 12px}th,td{border:1px solid var(--line);padding:3px 8px;text-align:right}th{background:#f6f8fa}td.l,th.l{text-align:left}
.met{color:var(--ok);font-weight:600}.missed{color:var(--bad);font-weight:600}.unsure{color:var(--muted);font-weight:600}
.warn{color:var(--bad)}
.headline .verdict{font-size:16px;margin:6px 0}.headline .tables{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
table.figures caption{text-align:left;font-weight:600;padding:2px 0}table.figures small{color:var(--muted)}
table.plan{font-size:12px;width:100%}table.plan td.l:last-child{max-width:340px}
ul.warnings{color:var(--bad)}ul.warnings code{background:#fbeaea;padding:0 4px}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:12px}
svg.chart{width:100%;height:auto;border:1px solid var(--line);background:#fff;font:10px system-ui,sans-serif}
svg.chart .ct{font-size:12px;font-weight:600;fill:var(--fg)}svg.chart .al{font-size:11px;fill:var(--muted)}
svg.chart text{fill:#333}svg.chart .grid{stroke:#eceff1}svg.chart .tick,svg.chart .frame{stroke:#888}
svg.chart .empty{fill:var(--muted)}svg.chart .pl{font-size:10px;fill:var(--fg)}
details{margin:8px 0}summary{cursor:pointer;color:var(--accent)}
nav a{margin-right:12px}
@media print{body{max-width:none;padding:0;font-size:11px}.charts{grid-template-columns:1fr 1fr}svg.chart,section.run,table,pre{break-inside:avoid}nav,details>summary{display:none}details{display:block}pre{white-space:pre-wrap}a{color:inherit;text-decoration:none}}
"#;

/// The page's head (Content-Security-Policy that loads nothing, the inline CSS) and its `<h1>`;
/// the caller ends the page with `</body></html>`.
pub(crate) fn open_page(o: &mut String, title: &str) {
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\"/>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\
         <title>{}</title><style>{CSS}</style></head><body>\n",
        esc(title)
    );
    let _ = writeln!(o, "<h1>{}</h1>", esc(title));
}

pub(crate) fn pre(o: &mut String, text: &str) {
    let _ = write!(o, "<pre>{}</pre>", esc(text.trim_matches('\n')));
}

pub(crate) fn charts_block(o: &mut String, cs: &[Chart]) {
    o.push_str("<div class=\"charts\">");
    for c in cs {
        o.push_str(&c.svg());
    }
    o.push_str("</div>\n");
}
