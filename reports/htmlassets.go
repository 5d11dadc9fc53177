package reports

// htmlStyle is the page's only stylesheet (inline).
const htmlStyle = `
:root{--fg:#1f2328;--mut:#59636e;--bd:#d1d9e0;--pass:#1a7f37;--fail:#cf222e;--unk:#9a6700;--skip:#59636e}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);margin:0 auto;max-width:1240px;padding:16px 20px 40px}
h1{font-size:22px;margin:4px 0}h2{font-size:18px;margin:26px 0 8px;border-bottom:1px solid var(--bd);padding-bottom:4px}h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid var(--bd);padding:3px 8px;text-align:left;vertical-align:top}th{background:#f6f8fa}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.gate td{background:#f6f8fa;border-bottom:2px solid #8c959f}tr.gate .what{display:block;font-size:11.5px;color:var(--mut)}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.muted{color:var(--mut)}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;color:#fff;letter-spacing:.03em}
.badge.pass{background:var(--pass)}.badge.fail,.badge.modified{background:var(--fail)}.badge.unknown,.badge.interrupted,.badge.incomplete{background:var(--unk)}.badge.skip{background:var(--skip)}.badge.explained{background:#8250df}
.headline{font-size:15px;margin:6px 0}ol.defects li{margin:6px 0}.ev{margin:2px 0}td.small{font-size:12px}
h1 .badge{font-size:15px;vertical-align:middle}
.note{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;border-radius:6px;margin:8px 0}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{border:1px solid var(--bd);border-radius:6px;padding:6px 12px;min-width:120px}
.card .k{font-size:11.5px;color:var(--mut);text-transform:uppercase;letter-spacing:.04em}.card .v{font-size:18px;font-weight:600;font-variant-numeric:tabular-nums}
.card.gate{max-width:520px}.card.gate .v{font-size:13px;font-weight:400}
.card .v.adm{color:var(--pass)}.card .v.rej{color:var(--fail)}.card .v.err{color:#6e7781}
ul.unverified li{margin:2px 0}
nav.keys{display:flex;flex-wrap:wrap;gap:4px 14px;margin:8px 0}
nav.keys a{text-decoration:none;color:#0969da}nav.keys .inst a{font-size:12px}
.view{display:none;border:1px solid var(--bd);border-radius:6px;padding:8px 12px;margin-top:8px}
.view:target{display:block}.dflt{display:block}.view:target~.dflt{display:none}
section.impl{border-left:4px solid var(--bd);padding-left:12px}
svg.plot{display:block;width:100%;height:auto;margin:6px 0}
svg text{font:11px system-ui,sans-serif;fill:var(--mut)}
svg .title{font-size:12.5px;font-weight:600;fill:var(--fg)}svg .axt{font-size:11.5px;fill:var(--fg)}svg .phl{font-size:10.5px}
svg .grid{stroke:#eaeef2;stroke-width:1}svg .axis{stroke:#8c959f;stroke-width:1}svg .lane{stroke:#d1d9e0;stroke-width:1}
svg .ln{fill:none;stroke-width:1.6;stroke-linejoin:round}
svg .adm{stroke:var(--pass)}svg .rej{stroke:var(--fail)}svg .err{stroke:#8c959f}
svg .env{stroke:#0969da;stroke-dasharray:6 4}svg .cap{stroke:#8250df;stroke-dasharray:3 3;stroke-width:1}
svg .lvl{stroke:#8250df}svg .p50{stroke:#0969da}svg .p99{stroke:#bc4c00}svg .p50,svg .p99{stroke-width:2;stroke-linecap:round}
svg .zero{stroke:#57606a;stroke-width:1}
svg .bar-a{fill:#2da44e;stroke:#2da44e}svg .bar-r{fill:#e5534b;stroke:#e5534b}svg .bar-e{fill:#8c959f;stroke:#8c959f}
svg rect.bar-a,svg rect.bar-r,svg rect.bar-e{stroke:none}
svg rect.fault{fill:#d4a72c;fill-opacity:.22}svg rect.viol{fill:#cf222e;fill-opacity:.08;stroke:#cf222e;stroke-opacity:.35}svg rect.violbar{fill:#cf222e}
svg rect.debt{fill:#cf222e;fill-opacity:.06}
svg .phase{stroke:#8c959f;stroke-dasharray:2 3}
svg .cross{stroke:#1f2328;stroke-width:1;stroke-dasharray:3 2;pointer-events:none}
svg .c0{stroke:#0072b2}svg .c1{stroke:#e69f00}svg .c2{stroke:#009e73}svg .c3{stroke:#cc79a7}svg .c4{stroke:#56b4e9}svg .c5{stroke:#d55e00}svg .c6{stroke:#000}svg .c7{stroke:#999}
svg .ov{stroke-width:2;stroke-opacity:.85}svg .env.ov{stroke-width:1.4}
.tip{position:absolute;display:none;pointer-events:none;background:#fff;border:1px solid #8c959f;border-radius:4px;padding:4px 8px;font:12px/1.4 system-ui,sans-serif;box-shadow:0 2px 6px rgba(0,0,0,.15);white-space:nowrap;z-index:10}
.tip b{display:block;margin-bottom:2px}.tip .v{float:right;margin-left:14px;font-weight:600;font-variant-numeric:tabular-nums}.tip i{display:inline-block;width:14px;height:3px;margin:0 6px 3px 0;vertical-align:middle;background:#8c959f}
.tip i.adm,.tip i.bar-a{background:#2da44e}.tip i.rej,.tip i.bar-r{background:#e5534b}.tip i.err,.tip i.bar-e{background:#8c959f}.tip i.sent{background:#1f2328}
.tip i.env{background:#0969da}.tip i.lvl{background:#8250df}.tip i.p50{background:#0969da}.tip i.p99{background:#bc4c00}
.tip i.c0{background:#0072b2}.tip i.c1{background:#e69f00}.tip i.c2{background:#009e73}.tip i.c3{background:#cc79a7}.tip i.c4{background:#56b4e9}.tip i.c5{background:#d55e00}.tip i.c6{background:#000}.tip i.c7{background:#999}
`

// overlayColours is how many implementations get a colour of their own
// (classes c0 … c7); more reuse them in turn.
const overlayColours = 8

// htmlScript shows the values under the pointer on every plot with a
// data-h attribute, from the JSON in #rlv-hover: a dashed crosshair and a
// box with each series' value in the bin under the pointer. It loads
// nothing and the page works without it.
const htmlScript = `(function(){
var el=document.getElementById('rlv-hover');if(!el)return;
var data=JSON.parse(el.textContent),tip=document.createElement('div');
tip.className='tip';document.body.appendChild(tip);
function dur(ns){var a=Math.abs(ns);
if(a>=1e9)return +(ns/1e9).toFixed(a>=1e10?1:3)+' s';
if(a>=1e6)return +(ns/1e6).toFixed(a>=1e7?1:2)+' ms';
if(a>=1e3)return +(ns/1e3).toFixed(a>=1e4?0:1)+' µs';
return Math.round(ns)+' ns';}
function num(v){var a=Math.abs(v);
if(Number.isInteger(v))return v.toLocaleString('en-US');
return a>=100?v.toFixed(0):a>=10?v.toFixed(1):v.toFixed(2);}
function fmt(v,u){if(v===null||v===undefined)return '–';
if(u==='ns')return dur(v);if(u==='/s')return num(v)+'/s';return num(v);}
function row(parent,cls,name,val){var d=document.createElement('div'),i=document.createElement('i'),v=document.createElement('span');
i.className=cls;v.className='v';v.textContent=val;d.appendChild(i);d.appendChild(document.createTextNode(name));d.appendChild(v);parent.appendChild(d);}
function hide(svg){tip.style.display='none';var c=svg.querySelector('line.cross');if(c)c.style.display='none';}
function show(svg,d,ev){var vb=svg.viewBox.baseVal,r=svg.getBoundingClientRect(),
x=(ev.clientX-r.left)*vb.width/r.width;
if(x<d.l||x>d.r){hide(svg);return;}
var t=d.t0+(x-d.l)/(d.r-d.l)*(d.t1-d.t0),c=svg.querySelector('line.cross');
c.setAttribute('x1',x);c.setAttribute('x2',x);c.style.display='';
tip.textContent='';var b=document.createElement('b');b.textContent='at '+dur(t);tip.appendChild(b);
d.s.forEach(function(s){var i=Math.floor((t-s.x0)/s.dx);
row(tip,s.c,s.n,i>=0&&i<s.v.length?fmt(s.v[i],s.u):'–');});
tip.style.display='block';
var left=ev.pageX+14;if(left+tip.offsetWidth>document.documentElement.scrollWidth-4)left=ev.pageX-14-tip.offsetWidth;
tip.style.left=left+'px';tip.style.top=(ev.pageY+14)+'px';}
document.querySelectorAll('svg[data-h]').forEach(function(svg){
var d=data[+svg.getAttribute('data-h')];if(!d)return;
svg.addEventListener('mousemove',function(ev){show(svg,d,ev);});
svg.addEventListener('mouseleave',function(){hide(svg);});});
})();`
