//! The console's API: the public gRPC methods as JSON over HTTP (`POST /api/<service>/<method>`),
//! called in-process on the same handlers the gRPC port serves — so a console user sees exactly
//! what their API key sees over gRPC, no more.
//!
//! Messages use protobuf's canonical JSON mapping (field names as in the `.proto`, 64-bit
//! integers as numbers, every field present). A server-streaming method answers with one JSON
//! object per line (`application/x-ndjson`), ending with `{"error": ...}` if the stream fails
//! after it began. Client-streaming methods (`ProcessorService.Connect`) are not offered.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{Buf, Bytes};
use futures::StreamExt;
use prost::Message;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions,
};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::service::Routes;

use super::error::ConsoleError;
use crate::server::pb;

/// How messages are written: proto field names, every field (so pages need no defaults), and
/// 64-bit integers as JSON numbers (times and counts stay far below 2^53).
const SERIALIZE: SerializeOptions = SerializeOptions::new()
    .use_proto_field_name(true)
    .skip_default_fields(false)
    .stringify_64_bit_integers(false);

/// Calls the agentwire services of `routes` from JSON.
#[derive(Clone)]
pub(super) struct Gateway {
    routes: Routes,
    descriptors: Arc<DescriptorPool>,
}

impl Gateway {
    /// A gateway to `routes`, described by the crate's own descriptor set.
    pub(super) fn new(routes: Routes) -> Result<Gateway, ConsoleError> {
        let descriptors = DescriptorPool::decode(pb::FILE_DESCRIPTOR_SET)
            .map_err(|error| ConsoleError::Descriptors(error.to_string()))?;
        Ok(Gateway { routes, descriptors: Arc::new(descriptors) })
    }

    /// Calls `service`'s `method` with the JSON `body`, as the caller whose credentials are in
    /// `headers` (`authorization: Bearer <key>` or `x-api-key`).
    pub(super) async fn call(
        &self,
        service: &str,
        method: &str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Response, ConsoleError> {
        let unknown = || ConsoleError::UnknownMethod(format!("{service}/{method}"));
        if !service.starts_with("agentwire.") {
            return Err(unknown());
        }
        let descriptor = self
            .descriptors
            .get_service_by_name(service)
            .and_then(|found| found.methods().find(|candidate| candidate.name() == method))
            .ok_or_else(unknown)?;
        if descriptor.is_client_streaming() {
            return Err(ConsoleError::ClientStreaming(format!("{service}/{method}")));
        }
        let request = parse(descriptor.input(), body)?;
        let mut request = tonic::Request::new(request);
        for name in ["authorization", "x-api-key"] {
            if let Some(value) = headers.get(name).and_then(|value| value.to_str().ok()) {
                let value = value.parse().map_err(|_| ConsoleError::BadHeader(name))?;
                request.metadata_mut().insert(name, value);
            }
        }
        let path = format!("/{service}/{method}").parse().map_err(|_| unknown())?;
        let codec = DynamicCodec { output: descriptor.output() };
        let mut grpc = tonic::client::Grpc::new(self.routes.clone());
        // Routes are always ready (their error is `Infallible`).
        let Ok(()) = grpc.ready().await;
        if !descriptor.is_server_streaming() {
            let response = grpc.unary(request, path, codec).await?;
            return Ok(json_response(write(&response.into_inner())));
        }
        let stream = grpc.server_streaming(request, path, codec).await?.into_inner();
        let lines = stream.map(|item| {
            let mut line = match item {
                Ok(message) => write(&message),
                Err(status) => ConsoleError::from(status).body(),
            };
            line.push(b'\n');
            Ok::<_, std::convert::Infallible>(Bytes::from(line))
        });
        let mut response = Body::from_stream(lines).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
        Ok(response)
    }
}

/// `body` as a message of `descriptor`; an empty body is the empty message.
fn parse(descriptor: MessageDescriptor, body: &[u8]) -> Result<DynamicMessage, ConsoleError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(DynamicMessage::new(descriptor));
    }
    let mut json = serde_json::Deserializer::from_slice(body);
    let message = DynamicMessage::deserialize_with_options(descriptor, &mut json, &DeserializeOptions::new())
        .and_then(|message| json.end().map(|()| message))
        .map_err(|error| ConsoleError::BadJson(error.to_string()))?;
    Ok(message)
}

/// `message` as JSON.
fn write(message: &DynamicMessage) -> Vec<u8> {
    let mut json = serde_json::Serializer::new(Vec::new());
    // Writing to memory fails only on a value JSON cannot hold, and messages hold none.
    let _ = message.serialize_with_options(&mut json, &SERIALIZE);
    json.into_inner()
}

fn json_response(body: Vec<u8>) -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Encodes requests and decodes responses of one method, by its descriptors.
struct DynamicCodec {
    output: MessageDescriptor,
}

impl Codec for DynamicCodec {
    type Encode = DynamicMessage;
    type Decode = DynamicMessage;
    type Encoder = DynamicEncoder;
    type Decoder = DynamicDecoder;

    fn encoder(&mut self) -> DynamicEncoder {
        DynamicEncoder
    }

    fn decoder(&mut self) -> DynamicDecoder {
        DynamicDecoder { output: self.output.clone() }
    }
}

struct DynamicEncoder;

impl Encoder for DynamicEncoder {
    type Item = DynamicMessage;
    type Error = tonic::Status;

    fn encode(&mut self, item: DynamicMessage, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        item.encode(dst).map_err(|error| tonic::Status::internal(error.to_string()))
    }
}

struct DynamicDecoder {
    output: MessageDescriptor,
}

impl Decoder for DynamicDecoder {
    type Item = DynamicMessage;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<DynamicMessage>, tonic::Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        DynamicMessage::decode(self.output.clone(), bytes)
            .map(Some)
            .map_err(|error| tonic::Status::internal(error.to_string()))
    }
}
