// The API reference page (/docs): swagger-ui-bundle.js, loaded before this script, renders /openapi.json with the
// settings the page carries in #docs-settings (interfaces/pages/docs.ts).
const settings = JSON.parse(document.getElementById('docs-settings').textContent);
window.ui = window.SwaggerUIBundle({ ...settings, presets: [window.SwaggerUIBundle.presets.apis], layout: 'BaseLayout' });
