//! An MCP server built with the official Rust SDK (`rmcp`): one tool, `echo`,
//! answering its arguments as text and `structuredContent`, in memory. It is
//! served over streamable HTTP the way the SDK serves without sessions:
//! `legacy_session_mode: false` (every request stands alone, no
//! `initialize`), `json_response: true` (a terminal answer is
//! `application/json`, not an SSE stream), on axum's default HTTP/1 server.
//!
//! `rmcp-echo [ADDR]` (or `RMCP_ECHO_ADDR`), default `127.0.0.1:0`; it prints
//! `rmcp-echo listening on http://ADDR/mcp` once bound. No authentication:
//! it binds loopback for the `peers` bench.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_router};

#[derive(Clone, Debug, Default)]
struct Echo;

#[tool_router(server_handler)]
impl Echo {
    #[tool(description = "Answers its arguments, as text and as structured content")]
    fn echo(&self, Parameters(args): Parameters<JsonObject>) -> CallToolResult {
        CallToolResult::structured(serde_json::Value::Object(args))
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("RMCP_ECHO_ADDR").ok())
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let config = StreamableHttpServerConfig::default().with_legacy_session_mode(false).with_json_response(true);
    let service = StreamableHttpService::new(|| Ok(Echo), NeverSessionManager::default().into(), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("rmcp-echo listening on http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, router).await
}
