//! `demo.users.v1.UserService`: three fixed accounts, and a help desk that chats back.

use tonic::{Request, Response, Status, Streaming};
use tonic_types::{ErrorDetails, StatusExt};

use crate::control::Control;
use crate::proto::users::user_service_server::UserService;
use crate::proto::users::{AccountState, ChatMessage, GetUserRequest, User};
use crate::streams::{bidi_stream, call_deadline, ResponseStream};

#[derive(Debug, Clone)]
pub struct Users {
    pub control: Control,
}

fn user(user_id: i32, username: &str, display_name: &str, state: AccountState) -> User {
    User {
        user_id,
        username: username.into(),
        display_name: display_name.into(),
        email: format!("{username}@example.com"),
        state: state as i32,
    }
}

pub fn find_user(user_id: i32) -> Option<User> {
    match user_id {
        1 => Some(user(1, "ada", "Ada Lovelace", AccountState::Active)),
        2 => Some(user(2, "grace", "Grace Hopper", AccountState::Active)),
        3 => Some(user(3, "mallory", "Mallory", AccountState::Suspended)),
        _ => None,
    }
}

/// Who the help desk's replies come from.
const DESK: &str = "desk";

/// The help desk's reply to the chat message at `index` (from 0), or INVALID_ARGUMENT naming
/// the index when it has no text.
fn desk_reply(index: usize, message: ChatMessage) -> Result<ChatMessage, Status> {
    if message.text.is_empty() {
        let mut details =
            ErrorDetails::with_bad_request_violation("text", format!("message {index}: must not be empty"));
        details.set_error_info(
            "CHAT_MESSAGE_REFUSED",
            "users.demo",
            [("index".to_owned(), index.to_string())],
        );
        return Err(Status::with_error_details(
            tonic::Code::InvalidArgument,
            format!("message {index}: text must not be empty"),
            details,
        ));
    }
    Ok(ChatMessage {
        text: format!("you said: {}", message.text),
        sender: DESK.into(),
    })
}

#[tonic::async_trait]
impl UserService for Users {
    async fn get_user(&self, request: Request<GetUserRequest>) -> Result<Response<User>, Status> {
        self.control
            .enter("/demo.users.v1.UserService/GetUser", request.metadata())
            .await;
        let user_id = request.into_inner().user_id;
        find_user(user_id)
            .map(Response::new)
            .ok_or_else(|| Status::not_found(format!("no user has id {user_id}")))
    }

    type ChatStream = ResponseStream<ChatMessage>;

    async fn chat(&self, request: Request<Streaming<ChatMessage>>) -> Result<Response<Self::ChatStream>, Status> {
        // Read before the upstream's artificial delay, which counts against it.
        let deadline = call_deadline(request.metadata());
        self.control
            .enter("/demo.users.v1.UserService/Chat", request.metadata())
            .await;
        let goodbye = ChatMessage {
            text: "bye".into(),
            sender: DESK.into(),
        };
        Ok(Response::new(bidi_stream(
            &self.control,
            deadline,
            request.into_inner(),
            desk_reply,
            Some(goodbye),
        )))
    }
}
