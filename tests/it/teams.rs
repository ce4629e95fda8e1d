//! teams: lifecycle, roles, invitations (one-time, expiring, email-bound), leave/remove,
//! team genies and `team_access`, activities for membership changes.

use genied::db::teams::{TeamRole, team_access};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn teams_members_invitations_and_genies() {
    let app = TestApp::spawn().await;
    let owner = app.standard().await;
    let bob = app.standard().await;
    let carol = app.standard().await;
    let outsider = app.standard().await;

    app.call(&owner.token, "teams", "create", None, json!({"name": "  "}))
        .await
        .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("teams").await, 0);
    let t = app
        .call(
            &owner.token,
            "teams",
            "create",
            None,
            json!({"name": "Support"}),
        )
        .await;
    let team = t.ok(201)["team"].clone();
    let tid = team["id"].as_str().unwrap().to_string();
    assert_eq!(team["my_role"], json!("owner"));
    assert_eq!(team["member_count"], json!(1));

    // Outsiders see nothing.
    app.call(&outsider.token, "teams", "get", Some(json!(tid)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    app.call(
        &outsider.token,
        "teams",
        "invite",
        Some(json!(tid)),
        json!({"email": "x@example.test"}),
    )
    .await
    .err(404, "NOT_FOUND");
    assert_eq!(
        app.call(&outsider.token, "teams", "all", None, json!({}))
            .await
            .ok(200)["count"],
        json!(0)
    );

    // Invite bob as admin; token shown once.
    app.call(
        &owner.token,
        "teams",
        "invite",
        Some(json!(tid)),
        json!({"email": "not-an-email"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &owner.token,
        "teams",
        "invite",
        Some(json!(tid)),
        json!({"email": bob.email, "role": "owner"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("team_invitations").await, 0);
    let r = app
        .call(
            &owner.token,
            "teams",
            "invite",
            Some(json!(tid)),
            json!({"email": bob.email, "role": "admin"}),
        )
        .await;
    let d = r.ok(201).clone();
    let token = d["token"].as_str().unwrap().to_string();
    assert_eq!(d["invitation"]["status"], json!("pending"));
    assert!(d["invitation"].get("token").is_none());
    let list = app
        .call(
            &owner.token,
            "teams",
            "invitations",
            Some(json!(tid)),
            json!({}),
        )
        .await;
    assert!(
        !list.ok(200).to_string().contains(&token),
        "tokens are never listed"
    );

    // Someone else cannot use bob's token; bob can, once.
    app.call(
        &carol.token,
        "teams",
        "accept",
        None,
        json!({"token": token}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &bob.token,
        "teams",
        "accept",
        None,
        json!({"token": "tinv_wrong"}),
    )
    .await
    .err(404, "NOT_FOUND");
    let r = app
        .call(&bob.token, "teams", "accept", None, json!({"token": token}))
        .await;
    assert_eq!(r.ok(200)["team"]["my_role"], json!("admin"));
    app.call(&bob.token, "teams", "accept", None, json!({"token": token}))
        .await
        .err(409, "CONFLICT");

    // Bob (admin) invites carol as member; an admin cannot invite admins.
    app.call(
        &bob.token,
        "teams",
        "invite",
        Some(json!(tid)),
        json!({"email": carol.email, "role": "admin"}),
    )
    .await
    .err(403, "FORBIDDEN");
    let r = app
        .call(
            &bob.token,
            "teams",
            "invite",
            Some(json!(tid)),
            json!({"email": carol.email}),
        )
        .await;
    let carol_token = r.ok(201)["token"].as_str().unwrap().to_string();
    let inv_id = r.data()["invitation"]["id"].as_str().unwrap().to_string();
    // Revoke it, then the token no longer works.
    let r = app
        .call(
            &owner.token,
            "teams",
            "revoke",
            Some(json!(tid)),
            json!({"invitation_id": inv_id}),
        )
        .await;
    assert_eq!(r.ok(200)["invitation"]["status"], json!("revoked"));
    app.call(
        &carol.token,
        "teams",
        "accept",
        None,
        json!({"token": carol_token}),
    )
    .await
    .err(409, "CONFLICT");

    // An expired invitation is refused.
    let r = app
        .call(
            &owner.token,
            "teams",
            "invite",
            Some(json!(tid)),
            json!({"email": carol.email}),
        )
        .await;
    let carol_token = r.ok(201)["token"].as_str().unwrap().to_string();
    app.state
        .db
        .write(|c| Ok(c.execute("UPDATE team_invitations SET expires_at = '2020-01-01T00:00:00.000Z' WHERE status = 'pending'", [])?))
        .await
        .unwrap();
    app.call(
        &carol.token,
        "teams",
        "accept",
        None,
        json!({"token": carol_token}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    let r = app
        .call(
            &owner.token,
            "teams",
            "invite",
            Some(json!(tid)),
            json!({"email": carol.email}),
        )
        .await;
    let carol_token = r.ok(201)["token"].as_str().unwrap().to_string();
    app.call(
        &carol.token,
        "teams",
        "accept",
        None,
        json!({"token": carol_token}),
    )
    .await
    .ok(200);
    // Inviting an existing member conflicts.
    app.call(
        &owner.token,
        "teams",
        "invite",
        Some(json!(tid)),
        json!({"email": carol.email}),
    )
    .await
    .err(409, "CONFLICT");

    // Decline path.
    let r = app
        .call(
            &owner.token,
            "teams",
            "invite",
            Some(json!(tid)),
            json!({"email": outsider.email}),
        )
        .await;
    let out_token = r.ok(201)["token"].as_str().unwrap().to_string();
    let r = app
        .call(
            &outsider.token,
            "teams",
            "decline",
            None,
            json!({"token": out_token}),
        )
        .await;
    assert_eq!(r.ok(200)["invitation"]["status"], json!("declined"));
    app.call(
        &outsider.token,
        "teams",
        "accept",
        None,
        json!({"token": out_token}),
    )
    .await
    .err(409, "CONFLICT");

    let members = app
        .call(
            &carol.token,
            "teams",
            "members",
            Some(json!(tid)),
            json!({}),
        )
        .await;
    let roles: Vec<&str> = members.ok(200)["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, vec!["owner", "admin", "member"]);

    // Members cannot rename or manage; admins can rename.
    app.call(
        &carol.token,
        "teams",
        "update",
        Some(json!(tid)),
        json!({"name": "Mine"}),
    )
    .await
    .err(403, "FORBIDDEN");
    let r = app
        .call(
            &bob.token,
            "teams",
            "update",
            Some(json!(tid)),
            json!({"name": "Customer Care"}),
        )
        .await;
    assert_eq!(r.ok(200)["team"]["name"], json!("Customer Care"));

    // Team genies and team_access.
    let genie = insert_genie(&app, &owner, "Shared Genie").await;
    app.call(
        &bob.token,
        "teams",
        "add-genie",
        Some(json!(tid)),
        json!({"genie_id": genie}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    app.call(
        &owner.token,
        "teams",
        "add-genie",
        Some(json!(tid)),
        json!({"genie_id": genie}),
    )
    .await
    .ok(200);
    let (g, c, o, b, x) = (
        genie.clone(),
        carol.id.clone(),
        owner.id.clone(),
        bob.id.clone(),
        outsider.id.clone(),
    );
    let access = app
        .state
        .db
        .read(move |conn| {
            Ok([
                team_access(conn, &c, &g)?,
                team_access(conn, &o, &g)?,
                team_access(conn, &b, &g)?,
                team_access(conn, &x, &g)?,
            ])
        })
        .await
        .unwrap();
    assert_eq!(
        access,
        [
            Some(TeamRole::Member),
            Some(TeamRole::Owner),
            Some(TeamRole::Admin),
            None
        ]
    );
    let got = app
        .call(&carol.token, "teams", "get", Some(json!(tid)), json!({}))
        .await;
    assert_eq!(got.ok(200)["team"]["genies"][0]["id"], json!(genie));
    // Members read the team's genie; team admins manage it; outsiders see nothing.
    let r = app
        .call(&carol.token, "genies", "get", Some(json!(genie)), json!({}))
        .await;
    assert_eq!(r.ok(200)["genie"]["name"], json!("Shared Genie"));
    app.call(
        &carol.token,
        "genies",
        "update",
        Some(json!(genie)),
        json!({"name": "Carol's"}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    let r = app
        .call(
            &bob.token,
            "genies",
            "update",
            Some(json!(genie)),
            json!({"name": "Shared by Bob"}),
        )
        .await;
    assert_eq!(r.ok(200)["genie"]["name"], json!("Shared by Bob"));
    app.call(
        &outsider.token,
        "genies",
        "get",
        Some(json!(genie)),
        json!({}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");

    // Admin removes carol; a member cannot remove; owner cannot leave; bob leaves.
    app.call(
        &carol.token,
        "teams",
        "remove-member",
        Some(json!(tid)),
        json!({"user_id": bob.id}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &bob.token,
        "teams",
        "remove-member",
        Some(json!(tid)),
        json!({"user_id": owner.id}),
    )
    .await
    .err(403, "FORBIDDEN");
    let r = app
        .call(
            &bob.token,
            "teams",
            "remove-member",
            Some(json!(tid)),
            json!({"user_id": carol.id}),
        )
        .await;
    assert_eq!(r.ok(200)["removed"], json!(true));
    app.call(&carol.token, "teams", "get", Some(json!(tid)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    app.call(&owner.token, "teams", "leave", Some(json!(tid)), json!({}))
        .await
        .err(409, "CONFLICT");
    app.call(&bob.token, "teams", "leave", Some(json!(tid)), json!({}))
        .await
        .ok(200);
    assert_eq!(
        app.call(
            &owner.token,
            "teams",
            "members",
            Some(json!(tid)),
            json!({})
        )
        .await
        .ok(200)["count"],
        json!(1)
    );

    // Membership changes are activities with meaningful summaries.
    let acts = app
        .call(&bob.token, "activities", "list", None, json!({}))
        .await
        .ok(200)
        .to_string();
    assert!(acts.contains("joined team 'Support' as admin"), "{acts}");
    assert!(
        acts.contains(&format!(
            "removed {} from team 'Customer Care'",
            carol.email
        )),
        "{acts}"
    );
    assert!(acts.contains("left team 'Customer Care'"), "{acts}");

    // Only the owner deletes.
    let r = app
        .call(&owner.token, "teams", "delete", Some(json!(tid)), json!({}))
        .await;
    assert_eq!(r.ok(200), &json!({"id": tid, "deleted": true}));
    assert_eq!(app.count("team_members").await, 0);
    assert_eq!(app.count("team_genies").await, 0);
    app.call(&owner.token, "teams", "nope", None, json!({}))
        .await
        .err(400, "INVALID_ACTION");
}
