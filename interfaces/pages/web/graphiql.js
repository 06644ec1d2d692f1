// GraphiQL (/graphql in a browser): runs before the GraphiQL bundle, which reads MonacoEnvironment as it loads; once
// the document is parsed (the bundle included), starts GraphiQL with the options in #graphiql-settings
// (interfaces/pages/graphiql.ts). Monaco's workers come from the gateway, not from blobs of inlined source.
const { options, workers } = JSON.parse(document.getElementById('graphiql-settings').textContent);
self.MonacoEnvironment = {
  globalAPI: false,
  getWorkerUrl: (_moduleId, label) => new URL(workers[label] ?? workers.editorWorkerService, location.href).href,
};
document.addEventListener('DOMContentLoaded', () => {
  window.YogaGraphiQL.renderYogaGraphiQL(document.querySelector('#root'), options);
});
