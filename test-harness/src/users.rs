//! `demo.users.v1.UserService`: three fixed accounts.

use tonic::{Request, Response, Status};

use crate::control::Control;
use crate::proto::users::user_service_server::UserService;
use crate::proto::users::{AccountState, GetUserRequest, User};

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
}
