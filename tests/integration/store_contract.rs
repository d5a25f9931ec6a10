//! The storage contract: the same checks on `SQLite` (always) and `PostgreSQL` (when
//! `GATEHOUSE_TEST_POSTGRES` names a server).

use crate::helpers::TestDb;
use gatehouse::app::open_store;
use gatehouse::domain::account::{AccountStatus, Email, Role};
use gatehouse::domain::audit::{Event, Outcome};
use gatehouse::domain::secret::TokenHash;
use gatehouse::store::audit::AuditEvent;
use gatehouse::store::hot::{HotLookup, HotReads};
use gatehouse::store::keys::{KeyUse, NewApiKey};
use gatehouse::store::oauth::{
    ClientRecord, CodeRecord, GrantRefusal, NewTokens, Redeemed, Rotation,
};
use gatehouse::store::services::NewService;
use gatehouse::store::urls::NewPersonalUrl;
use gatehouse::store::{Backend, Store, StoreError};

async fn accounts_contract(store: &Store) {
    let alice = Email::parse("Alice@Example.com").unwrap();
    let a = store
        .create_account(&alice, "$argon2id$x", 100)
        .await
        .unwrap();
    assert_eq!(a.email, "alice@example.com");
    let dup = store
        .create_account(&Email::parse("ALICE@example.COM").unwrap(), "h", 100)
        .await;
    assert!(
        matches!(dup, Err(StoreError::Conflict(_))),
        "emails are unique case-insensitively"
    );
    let found = store.account_by_email(&alice).await.unwrap().unwrap();
    assert_eq!(found.id, a.id);
    assert_eq!(found.status, AccountStatus::Active);
    assert_eq!(found.created_at, 100);
    store
        .set_account_status(&alice, AccountStatus::Disabled)
        .await
        .unwrap();
    assert_eq!(
        store.account_by_id(&a.id).await.unwrap().unwrap().status,
        AccountStatus::Disabled
    );
    let missing = store
        .set_account_status(
            &Email::parse("no@example.com").unwrap(),
            AccountStatus::Disabled,
        )
        .await;
    assert!(matches!(missing, Err(StoreError::NotFound(_))));
    // This one and the first, made with the setup link (setup_token_contract).
    assert_eq!(store.count_accounts().await.unwrap(), 2);
}

async fn projects_contract(store: &Store) {
    let owner = store
        .create_account(&Email::parse("o@example.com").unwrap(), "h", 1)
        .await
        .unwrap();
    let other = store
        .create_account(&Email::parse("m@example.com").unwrap(), "h", 1)
        .await
        .unwrap();
    let p = store
        .create_project("Research", &owner.id, 10)
        .await
        .unwrap();
    let mine = store.projects_of_account(&owner.id).await.unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].name, "Research");
    assert_eq!(mine[0].role, Role::Write);
    assert!(store.membership(&other.id, &p).await.unwrap().is_none());
    store
        .add_member(&p, &other.id, Role::Read, 11)
        .await
        .unwrap();
    assert_eq!(
        store.membership(&other.id, &p).await.unwrap().unwrap().role,
        Role::Read
    );
    store
        .add_member(&p, &other.id, Role::Write, 12)
        .await
        .unwrap();
    assert_eq!(
        store.membership(&other.id, &p).await.unwrap().unwrap().role,
        Role::Write
    );
    assert!(matches!(
        store.add_member("nope", &other.id, Role::Read, 1).await,
        Err(StoreError::NotFound(_))
    ));
}

async fn setup_token_contract(store: &Store) {
    let h = TokenHash::of("gate_setup_abc");
    store.create_setup_token(&h, 100, 200).await.unwrap();
    assert!(store.setup_token_valid(&h, 150).await.unwrap());
    assert!(
        !store.setup_token_valid(&h, 200).await.unwrap(),
        "expired at expires_at"
    );
    let e = Email::parse("first@example.com").unwrap();
    assert!(
        store
            .create_account_with_setup_token(&h, &e, "h", 250)
            .await
            .unwrap()
            .is_none()
    );
    let a = store
        .create_account_with_setup_token(&h, &e, "h", 150)
        .await
        .unwrap();
    assert!(a.is_some());
    let again = store
        .create_account_with_setup_token(&h, &Email::parse("second@example.com").unwrap(), "h", 151)
        .await
        .unwrap();
    assert!(again.is_none(), "a setup token is single use");
    // Once an account exists, every setup link is void (issue 30, finding 12).
    let later = TokenHash::of("gate_setup_later");
    store.create_setup_token(&later, 300, 400).await.unwrap();
    assert!(!store.setup_token_valid(&later, 350).await.unwrap());
    let third = Email::parse("third@example.com").unwrap();
    assert!(
        store
            .create_account_with_setup_token(&later, &third, "h", 350)
            .await
            .unwrap()
            .is_none()
    );
}

async fn audit_contract(store: &Store) {
    store
        .record_audit(
            &AuditEvent {
                source_ip: Some("127.0.0.1"),
                ..AuditEvent::new(Event::Signin, Outcome::Failure)
            },
            42,
        )
        .await
        .unwrap();
    let recent = store.recent_audit(5).await.unwrap();
    assert_eq!(recent.len(), 1);
    assert_eq!(recent[0].event, "signin");
    assert_eq!(recent[0].at, 42);
    assert_eq!(recent[0].source_ip.as_deref(), Some("127.0.0.1"));

    // Routine rows through the batching writer, committed as multi-row inserts: every row
    // arrives once with its own values, whatever sizes its batches were cut into.
    let writer = store.start_audit_writer().expect("the first writer");
    let subjects: Vec<String> = (0..301).map(|i| format!("tool-{i}")).collect();
    for (i, subject) in subjects.iter().enumerate() {
        let detail = format!("n={i}");
        store
            .audit_batched(
                AuditEvent {
                    account_id: i.is_multiple_of(3).then_some("acct"),
                    subject: Some(subject),
                    detail: Some(&detail),
                    ..AuditEvent::new(
                        Event::ToolCall,
                        if i.is_multiple_of(2) {
                            Outcome::Success
                        } else {
                            Outcome::Error
                        },
                    )
                },
                1000 + i as i64,
            )
            .await;
    }
    store.flush_audit().await;
    let recent = store.recent_audit(400).await.unwrap();
    let calls: Vec<_> = recent.iter().filter(|r| r.event == "tool_call").collect();
    assert_eq!(calls.len(), subjects.len(), "every queued row, once");
    for r in calls {
        let i: usize = r.subject.as_deref().unwrap()["tool-".len()..]
            .parse()
            .unwrap();
        assert_eq!(r.at, 1000 + i as i64);
        assert_eq!(
            r.outcome,
            if i.is_multiple_of(2) {
                "success"
            } else {
                "error"
            }
        );
        assert_eq!(
            r.account_id.as_deref(),
            i.is_multiple_of(3).then_some("acct")
        );
        assert_eq!(r.detail.as_deref(), Some(format!("n={i}").as_str()));
        assert_eq!(r.client_id, None);
    }
    writer.drain().await;
}

async fn jobs_contract(store: &Store) {
    use gatehouse::domain::notes::{JobKind, JobStatus};
    let owner = store
        .create_account(&Email::parse("jobs@example.com").unwrap(), "h", 1)
        .await
        .unwrap();
    let p = store.create_project("Jobs", &owner.id, 1).await.unwrap();
    // A job created at t=100 whose instance stopped before running it.
    let job = store
        .create_job(JobKind::Export, &p, &owner.id, None, 100)
        .await
        .unwrap();
    assert_eq!(
        store.recover_stale_jobs(50, 200).await.unwrap(),
        0,
        "not stale yet"
    );
    assert_eq!(store.recover_stale_jobs(150, 200).await.unwrap(), 1);
    let done = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(done.status, JobStatus::Completed);
    let doc: serde_json::Value = serde_json::from_str(done.result.as_deref().unwrap()).unwrap();
    assert_eq!(doc["project_id"], p.as_str());
    assert_eq!(
        store.recover_stale_jobs(i64::MAX, 300).await.unwrap(),
        0,
        "finished jobs stay finished"
    );
}

async fn count(raw: &sqlx::AnyPool, table: &str) -> i64 {
    use sqlx::Row;
    sqlx::query(&format!("SELECT COUNT(*) AS n FROM {table}"))
        .fetch_one(raw)
        .await
        .unwrap()
        .try_get("n")
        .unwrap()
}

/// A new active account with `email`; its id.
async fn new_account(store: &Store, email: &str) -> String {
    store
        .create_account(&Email::parse(email).unwrap(), "h", 1)
        .await
        .unwrap()
        .id
}

/// The stored state of a refresh token that must exist.
async fn state_of(store: &Store, hash: &TokenHash) -> gatehouse::store::oauth::RefreshState {
    store.refresh_state(hash).await.unwrap().unwrap()
}

const CALLBACK: &str = "https://a.example/cb";

/// A new client, an approval of `scope` by `account` and an unused code of that scope under it,
/// issued at `now`; returns the code and the tokens its redemption would create (access token
/// expiring at `access_exp`).
async fn pending_code(
    store: &Store,
    account: &str,
    scope: &str,
    now: i64,
    access_exp: i64,
) -> (CodeRecord, NewTokens) {
    let client_id = format!("gc_{}", uuid::Uuid::new_v4().simple());
    store
        .create_client(&ClientRecord {
            client_id: client_id.clone(),
            client_secret_hash: None,
            token_endpoint_auth_method: "none".into(),
            client_name: None,
            redirect_uris: vec![CALLBACK.into()],
            grant_types: vec!["authorization_code".into(), "refresh_token".into()],
            scope: None,
            metadata: serde_json::json!({}),
            can_introspect: false,
            created_at: now,
        })
        .await
        .unwrap();
    let consent = store
        .approve_consent(account, &client_id, CALLBACK, scope, now)
        .await
        .unwrap();
    let code = CodeRecord {
        code_hash: TokenHash::of(&format!("code-{client_id}")),
        client_id: client_id.clone(),
        account_id: account.into(),
        consent_id: consent,
        redirect_uri: CALLBACK.into(),
        code_challenge: "x".repeat(43),
        resource: "https://mcp.example/mcp".into(),
        scope: scope.into(),
        issuer: Some("https://mcp.example".into()),
        created_at: now,
        expires_at: now + 600,
        used_at: None,
        dpop_jkt: None,
        grant_expires_at: None,
    };
    store.insert_code(&code).await.unwrap();
    let tokens = NewTokens {
        refresh_hash: TokenHash::of(&format!("rt-{client_id}")),
        access_hash: TokenHash::of(&format!("at-{client_id}")),
        access_expires_at: access_exp,
        scope: scope.into(),
        jkt: None,
        refresh_jkt: None,
    };
    (code, tokens)
}

/// Redeems a fresh code at `now` into a family whose access token expires at `access_exp`;
/// returns (family id, refresh hash).
async fn issue(store: &Store, account: &str, now: i64, access_exp: i64) -> (String, TokenHash) {
    let (code, tokens) = pending_code(store, account, "mcp:read", now, access_exp).await;
    match store.redeem_code(&code, &tokens, now).await.unwrap() {
        Redeemed::Issued { family_id } => (family_id, tokens.refresh_hash),
        other => panic!("{other:?}"),
    }
}

async fn grants_contract(store: &Store, raw: &sqlx::AnyPool) {
    let email = Email::parse("grants@example.com").unwrap();
    let owner = store.create_account(&email, "h", 1).await.unwrap().id;
    let revoke_behind_its_back = |consent: String| async move {
        sqlx::query("UPDATE consents SET revoked_at = 1001 WHERE id = $1")
            .bind(consent)
            .execute(raw)
            .await
            .unwrap();
    };
    // A revocation that lands after the code was issued refuses it in the redemption itself,
    // even before the revocation has used the code up.
    let (code, tokens) = pending_code(store, &owner, "mcp:read", 1000, 5000).await;
    revoke_behind_its_back(code.consent_id.clone()).await;
    let refused = Redeemed::Refused(GrantRefusal::Revoked);
    assert_eq!(
        store.redeem_code(&code, &tokens, 1002).await.unwrap(),
        refused
    );
    // Approving again is a new grant generation; the old code stays refused.
    let again = store
        .approve_consent(&owner, &code.client_id, CALLBACK, "mcp:read", 1003)
        .await
        .unwrap();
    assert_ne!(again, code.consent_id, "a revoked consent is never revived");
    assert_eq!(
        store.redeem_code(&code, &tokens, 1004).await.unwrap(),
        refused
    );
    // A code (or tokens) beyond the live approval's scope is refused.
    let wide = CodeRecord {
        code_hash: TokenHash::of("wide-code"),
        consent_id: again.clone(),
        scope: "mcp:read mcp:write".into(),
        ..code.clone()
    };
    store.insert_code(&wide).await.unwrap();
    let wide_tokens = NewTokens {
        refresh_hash: TokenHash::of("wide-rt"),
        access_hash: TokenHash::of("wide-at"),
        ..tokens.clone()
    };
    assert_eq!(
        store.redeem_code(&wide, &wide_tokens, 1005).await.unwrap(),
        Redeemed::Refused(GrantRefusal::ScopeExceedsApproval)
    );
    // Approving more widens the live consent in place (remembered consent), and then it does.
    let widened = store
        .approve_consent(&owner, &code.client_id, CALLBACK, "mcp:write", 1006)
        .await
        .unwrap();
    assert_eq!(widened, again);
    let live = store
        .consent(&owner, &code.client_id, CALLBACK)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(live.scope, "mcp:read mcp:write");
    assert!(matches!(
        store.redeem_code(&wide, &wide_tokens, 1007).await.unwrap(),
        Redeemed::Issued { .. }
    ));
    // A disabled account's code is refused and stays unused; disabling uses it up.
    let other_email = Email::parse("disabled@example.com").unwrap();
    let other = store.create_account(&other_email, "h", 1).await.unwrap().id;
    let (code, tokens) = pending_code(store, &other, "mcp:read", 1000, 5000).await;
    store
        .set_account_status(&other_email, AccountStatus::Disabled)
        .await
        .unwrap();
    assert_eq!(
        store.redeem_code(&code, &tokens, 1002).await.unwrap(),
        Redeemed::Refused(GrantRefusal::AccountDisabled)
    );
    assert_eq!(
        store.code(&code.code_hash).await.unwrap().unwrap().used_at,
        None
    );
    assert_eq!(
        store.use_up_codes_of_account(&other, 1003).await.unwrap(),
        1
    );
    store
        .set_account_status(&other_email, AccountStatus::Active)
        .await
        .unwrap();
    assert_eq!(
        store.redeem_code(&code, &tokens, 1004).await.unwrap(),
        Redeemed::Replayed { family_id: None },
        "used up, never redeemed"
    );
    // Revoking a consent uses up its unused codes.
    let (code, _) = pending_code(store, &owner, "mcp:read", 1000, 5000).await;
    store
        .revoke_consent(&owner, &code.consent_id, 1001)
        .await
        .unwrap();
    assert_eq!(
        store.code(&code.code_hash).await.unwrap().unwrap().used_at,
        Some(1001)
    );
    // A rotation whose grant was revoked after the token was read writes nothing.
    let (_, refresh) = issue(store, &owner, 1000, 5000).await;
    let state = state_of(store, &refresh).await;
    assert!(state.within_approval);
    let access = TokenHash::of("at-after-revocation");
    let next = NewTokens {
        refresh_hash: TokenHash::of("rt-after-revocation"),
        access_hash: access.clone(),
        access_expires_at: 5000,
        scope: "mcp:read".into(),
        jkt: None,
        refresh_jkt: None,
    };
    revoke_behind_its_back(state.consent_id.clone()).await;
    assert_eq!(
        store
            .rotate_refresh(&refresh, &state, b"sealed", &next, 1002)
            .await
            .unwrap(),
        Rotation::Refused(GrantRefusal::Revoked)
    );
    let after = state_of(store, &refresh).await;
    assert_eq!(after.rotated_at, None, "nothing written");
    assert!(after.consent_revoked);
    // The bearer lookup never returns a token beyond its live approval.
    let (family, _) = issue(store, &owner, 1000, 5000).await;
    let bearer = sqlx::query("SELECT token_hash FROM access_tokens WHERE family_id = $1")
        .bind(&family)
        .fetch_one(raw)
        .await
        .unwrap();
    let bearer = TokenHash::from_hex(sqlx::Row::try_get(&bearer, "token_hash").unwrap());
    assert!(
        store
            .authenticate_access_token(&bearer, 1001)
            .await
            .unwrap()
            .is_some()
    );
    sqlx::query(
        "UPDATE consents SET scope = '' WHERE id = (SELECT consent_id FROM token_families WHERE id = $1)",
    )
    .bind(&family)
    .execute(raw)
    .await
    .unwrap();
    assert!(
        store
            .authenticate_access_token(&bearer, 1001)
            .await
            .unwrap()
            .is_none()
    );
}

/// The announcements the validation cache trusts (migrations 0012 and 0013): the next one on
/// `SQLite` is the generation row, on `PostgreSQL` a notification on `gatehouse_auth`.
enum Announcements {
    Generation(sqlx::AnyPool),
    Notify(Box<sqlx::postgres::PgListener>, sqlx::PgPool),
}

impl Announcements {
    async fn open(db: &TestDb) -> Announcements {
        if db.url.starts_with("postgres") {
            let mut listener = sqlx::postgres::PgListener::connect(&db.url).await.unwrap();
            listener.listen("gatehouse_auth").await.unwrap();
            let sender = sqlx::PgPool::connect(&db.url).await.unwrap();
            Announcements::Notify(Box::new(listener), sender)
        } else {
            Announcements::Generation(db.pool().await.clone())
        }
    }

    /// A mark to compare with later: the generation; on `PostgreSQL` everything announced so
    /// far is consumed first.
    async fn mark(&mut self) -> i64 {
        match self {
            Announcements::Generation(raw) => {
                sqlx::query_scalar("SELECT generation FROM auth_generation WHERE id = 1")
                    .fetch_one(&*raw)
                    .await
                    .unwrap()
            }
            Announcements::Notify(..) => {
                self.since(0).await;
                0
            }
        }
    }

    /// Whether anything was announced since `mark`. On `PostgreSQL`: a sentinel notification
    /// is sent now; notifications arrive in commit order, so any announcement of an earlier
    /// commit arrives before it.
    async fn since(&mut self, mark: i64) -> bool {
        match self {
            Announcements::Generation(raw) => {
                let now: i64 =
                    sqlx::query_scalar("SELECT generation FROM auth_generation WHERE id = 1")
                        .fetch_one(&*raw)
                        .await
                        .unwrap();
                now != mark
            }
            Announcements::Notify(listener, sender) => {
                sqlx::query("SELECT pg_notify('gatehouse_auth', 'sentinel')")
                    .execute(&*sender)
                    .await
                    .unwrap();
                let mut announced = false;
                loop {
                    let heard = listener.recv().await.unwrap();
                    if heard.payload() == "sentinel" {
                        return announced;
                    }
                    announced = true;
                }
            }
        }
    }
}

/// Refresh rotation and code redemption change nothing a credential lookup reads, so they
/// announce nothing: on `PostgreSQL` a notifying transaction holds the server's global
/// notification lock through its commit, which would put every rotation in one line. Ending a
/// grant still announces (the control that makes the first checks able to fail), and so does
/// a change of the account's budget, which the lookups now read.
async fn issuance_announces_nothing_contract(store: &Store, db: &TestDb) {
    let owner = new_account(store, "quiet@example.com").await;
    let mut announcements = Announcements::open(db).await;
    let (code, tokens) = pending_code(store, &owner, "mcp:read", 2000, 9000).await;
    let mark = announcements.mark().await;
    let family = match store.redeem_code(&code, &tokens, 2001).await.unwrap() {
        Redeemed::Issued { family_id } => family_id,
        other => panic!("{other:?}"),
    };
    assert!(
        !announcements.since(mark).await,
        "a code redemption announced a change"
    );
    let state = state_of(store, &tokens.refresh_hash).await;
    let next = NewTokens {
        refresh_hash: TokenHash::of("rt-quiet"),
        access_hash: TokenHash::of("at-quiet"),
        access_expires_at: 9000,
        scope: "mcp:read".into(),
        jkt: None,
        refresh_jkt: None,
    };
    let mark = announcements.mark().await;
    assert_eq!(
        store
            .rotate_refresh(&tokens.refresh_hash, &state, b"sealed", &next, 2002)
            .await
            .unwrap(),
        Rotation::Rotated
    );
    assert!(
        !announcements.since(mark).await,
        "a refresh rotation announced a change"
    );
    // The same token again: lost, and neither of its would-be successors is written.
    let again = NewTokens {
        refresh_hash: TokenHash::of("rt-quiet-again"),
        access_hash: TokenHash::of("at-quiet-again"),
        ..next.clone()
    };
    assert_eq!(
        store
            .rotate_refresh(&tokens.refresh_hash, &state, b"sealed", &again, 2002)
            .await
            .unwrap(),
        Rotation::Lost
    );
    let raw = db.pool().await;
    for (table, hash) in [
        ("refresh_tokens", &again.refresh_hash),
        ("access_tokens", &again.access_hash),
    ] {
        let n: i64 = sqlx::query_scalar(&format!(
            "SELECT COUNT(*) FROM {table} WHERE token_hash = $1"
        ))
        .bind(hash.as_str())
        .fetch_one(raw)
        .await
        .unwrap();
        assert_eq!(n, 0, "a lost rotation wrote into {table}");
    }
    // The won rotation wrote both successors, and the access token is live.
    assert!(
        store
            .authenticate_access_token(&next.access_hash, 2002)
            .await
            .unwrap()
            .is_some()
    );
    let successor = state_of(store, &next.refresh_hash).await;
    assert_eq!(successor.family_id, family);
    assert_eq!(successor.rotated_at, None);
    let mark = announcements.mark().await;
    assert!(store.revoke_family(&family, "test", 2003).await.unwrap());
    assert!(
        announcements.since(mark).await,
        "revoking a family must announce it"
    );
    let mark = announcements.mark().await;
    store
        .revoke_consent(&owner, &code.consent_id, 2004)
        .await
        .unwrap();
    assert!(
        announcements.since(mark).await,
        "withdrawing a consent must announce it"
    );
    // The lookups carry the account's own tool-call budget: changing it is announced too.
    let mark = announcements.mark().await;
    store
        .set_account_calls_per_hour(&owner, Some(5))
        .await
        .unwrap();
    assert!(
        announcements.since(mark).await,
        "changing an account's budget must announce it"
    );
}

/// A consent withdrawn while a refresh rotation under it runs: whichever commits first, no
/// token minted by the rotation outlives the withdrawal (the rotation locks the consent row:
/// `FOR SHARE` on `PostgreSQL`, the write lock on `SQLite`), and the withdrawal reports the
/// grant it ended.
async fn rotation_racing_withdrawal_contract(store: &Store, raw: &sqlx::AnyPool) {
    let owner = new_account(store, "race@example.com").await;
    for trial in 0..20 {
        let (code, tokens) = pending_code(store, &owner, "mcp:read", 3000, 9000).await;
        assert!(matches!(
            store.redeem_code(&code, &tokens, 3001).await.unwrap(),
            Redeemed::Issued { .. }
        ));
        let state = state_of(store, &tokens.refresh_hash).await;
        let next = NewTokens {
            refresh_hash: TokenHash::of(&format!("rt-race-{trial}")),
            access_hash: TokenHash::of(&format!("at-race-{trial}")),
            access_expires_at: 9000,
            scope: "mcp:read".into(),
            jkt: None,
            refresh_jkt: None,
        };
        let (rotation, withdrawal) = tokio::join!(
            store.rotate_refresh(&tokens.refresh_hash, &state, b"sealed", &next, 3002),
            store.revoke_consent(&owner, &code.consent_id, 3002),
        );
        let rotation = rotation.unwrap();
        assert!(
            rotation == Rotation::Rotated || rotation == Rotation::Refused(GrantRefusal::Revoked),
            "trial {trial}: {rotation:?}"
        );
        assert_eq!(
            withdrawal.unwrap().as_deref(),
            Some(code.client_id.as_str()),
            "trial {trial}: the withdrawal ended the grant"
        );
        assert!(
            store
                .authenticate_access_token(&next.access_hash, 3003)
                .await
                .unwrap()
                .is_none(),
            "trial {trial}: a token minted beside the withdrawal is live ({rotation:?})"
        );
        // The row itself is marked revoked, not only refused through its consent: the
        // withdrawal's update of the family's access tokens saw it (or it was never written).
        let unrevoked: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM access_tokens WHERE token_hash = $1 AND revoked_at IS NULL",
        )
        .bind(next.access_hash.as_str())
        .fetch_one(raw)
        .await
        .unwrap();
        assert_eq!(
            unrevoked, 0,
            "trial {trial}: a token minted beside the withdrawal was left unrevoked ({rotation:?})"
        );
    }
}

/// Lookups that run together (batched into one statement on `PostgreSQL`) each get their own
/// rows, a key asked twice gets its rows twice, an unknown key gets none, and a lookup that
/// starts after a write committed sees it even while lookups of the same key keep running.
async fn concurrent_lookups_contract(store: &Store) {
    let before = store.lookup_batch_statements();
    // Another test of this process that finds a file unwritable sends every in-place read of
    // the process to the pool for a while (`UNWRITABLE_PAUSE`, process-wide by design).
    let paused = || store.in_place_stats().map_or(0, |s| s.paused);
    let paused_before = paused();
    let paths_before =
        [HotLookup::ProjectsOfAccount, HotLookup::RefreshToken].map(|l| store.hot_reads(l));
    let mut accounts = Vec::new();
    for i in 0..12 {
        let account = new_account(store, &format!("lookups-{i}@example.com")).await;
        let mut names = Vec::new();
        for p in 0..(i % 4) {
            let name = format!("lookups-{i}-{p}");
            store
                .create_project(&name, &account, 500 + p)
                .await
                .unwrap();
            names.push(name);
        }
        accounts.push((account, names));
    }
    let asked: Vec<(&str, &[String])> = accounts
        .iter()
        .chain(accounts.iter())
        .map(|(account, names)| (account.as_str(), names.as_slice()))
        .chain([("no-such-account", &[][..])])
        .collect();
    let listings = asked
        .iter()
        .map(|(account, _)| store.projects_of_account(account));
    for ((account, names), listing) in asked.iter().zip(futures::future::join_all(listings).await) {
        let listed: Vec<String> = listing.unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(
            &listed, names,
            "account {account}: its own projects, oldest first"
        );
    }

    let mut tokens = Vec::new();
    for _ in 0..12 {
        let owner = &accounts[0].0;
        let (family_id, refresh) = issue(store, owner, 4000, 9000).await;
        tokens.push((refresh, Some(family_id)));
    }
    tokens.push((TokenHash::of("lookups-unknown"), None));
    let lookups = tokens.iter().map(|(hash, _)| store.refresh_state(hash));
    for ((hash, family), state) in tokens.iter().zip(futures::future::join_all(lookups).await) {
        let found = state.unwrap().map(|s| s.family_id);
        assert_eq!(&found, family, "token {}", hash.as_str());
    }
    let together = store.lookup_batch_statements() - before;
    // Each lookup was answered once, on its engine's path: in place on SQLite (the pool after
    // a failed in-place read), in a batch on PostgreSQL.
    let since = |which: HotLookup, before: HotReads| {
        let now = store.hot_reads(which);
        HotReads {
            in_place: now.in_place - before.in_place,
            batched: now.batched - before.batched,
            pool: now.pool - before.pool,
        }
    };
    for (which, before, n) in [
        (
            HotLookup::ProjectsOfAccount,
            paths_before[0],
            asked.len() as u64,
        ),
        (
            HotLookup::RefreshToken,
            paths_before[1],
            tokens.len() as u64,
        ),
    ] {
        let paths = since(which, before);
        let expected = match store.backend() {
            Backend::Postgres => HotReads {
                in_place: 0,
                batched: n,
                pool: 0,
            },
            Backend::Sqlite => HotReads {
                in_place: paths.in_place,
                batched: 0,
                pool: n - paths.in_place,
            },
        };
        assert_eq!(paths, expected, "{which:?}: {n} lookups");
        if store.backend() == Backend::Sqlite
            && store.in_place_stats().is_some()
            && paused() == paused_before
        {
            assert!(paths.in_place > 0, "{which:?}: none ran in place");
        }
    }

    // Freshness: lookups of one account keep running while its projects are created; each
    // lookup made after a creation returned lists that project.
    let (account, _) = &accounts[1];
    let stop = std::sync::atomic::AtomicBool::new(false);
    let background = async {
        let mut n = 0u32;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            store.projects_of_account(account).await.unwrap();
            n += 1;
            tokio::task::yield_now().await;
        }
        n
    };
    let foreground = async {
        for round in 0..10 {
            let name = format!("lookups-fresh-{round}");
            store
                .create_project(&name, account, 900 + round)
                .await
                .unwrap();
            let listed = store.projects_of_account(account).await.unwrap();
            assert!(
                listed.iter().any(|m| m.name == name),
                "round {round}: the project created before the lookup is listed"
            );
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    };
    let (ran, ()) = tokio::join!(background, foreground);
    assert!(ran > 0);

    if store.backend() == Backend::Postgres {
        let lookups = (asked.len() + tokens.len()) as u64;
        assert!(
            together < lookups,
            "lookups made together shared statements: {together} statements for {lookups} lookups"
        );
    } else {
        assert_eq!(together, 0, "SQLite reads in place");
    }
}

/// Rotations that arrive together (committed in groups on `SQLite`): each distinct token
/// rotates once with its own successors; of the same token presented many times at once,
/// exactly one rotation wins and the others write nothing.
async fn concurrent_rotations_contract(store: &Store, raw: &sqlx::AnyPool) {
    let owner = new_account(store, "together@example.com").await;
    let mut chains = Vec::new();
    for _ in 0..40 {
        let (_, refresh) = issue(store, &owner, 4000, 9000).await;
        let state = state_of(store, &refresh).await;
        chains.push((refresh, state));
    }
    let next = |tag: String| NewTokens {
        refresh_hash: TokenHash::of(&format!("rt-{tag}")),
        access_hash: TokenHash::of(&format!("at-{tag}")),
        access_expires_at: 9000,
        scope: "mcp:read".into(),
        jkt: None,
        refresh_jkt: None,
    };
    let rotations = chains.iter().enumerate().map(|(i, (refresh, state))| {
        let new = next(format!("together-{i}"));
        async move {
            let r = store
                .rotate_refresh(refresh, state, b"sealed", &new, 4001)
                .await
                .unwrap();
            (r, new)
        }
    });
    for (i, (rotation, new)) in futures::future::join_all(rotations)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(rotation, Rotation::Rotated, "chain {i}");
        assert!(
            store
                .authenticate_access_token(&new.access_hash, 4002)
                .await
                .unwrap()
                .is_some(),
            "chain {i}: its new access token is live"
        );
        let successor = state_of(store, &new.refresh_hash).await;
        assert_eq!(successor.family_id, chains[i].1.family_id, "chain {i}");
    }
    // One token, twenty rotations at once: one wins.
    let (refresh, state) = {
        let (_, refresh) = issue(store, &owner, 4000, 9000).await;
        let state = state_of(store, &refresh).await;
        (refresh, state)
    };
    let attempts = (0..20).map(|i| {
        let new = next(format!("same-{i}"));
        let (refresh, state) = (&refresh, &state);
        async move {
            store
                .rotate_refresh(refresh, state, b"sealed", &new, 4003)
                .await
                .unwrap()
        }
    });
    let results = futures::future::join_all(attempts).await;
    let won = results.iter().filter(|r| **r == Rotation::Rotated).count();
    assert_eq!(won, 1, "{results:?}");
    assert!(
        results
            .iter()
            .all(|r| *r == Rotation::Rotated || *r == Rotation::Lost)
    );
    let written: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM refresh_tokens WHERE family_id = $1")
            .bind(&state.family_id)
            .fetch_one(raw)
            .await
            .unwrap();
    assert_eq!(written, 2, "the presented token and one successor");
}

/// Grants whose chosen end passes between the read of their refresh tokens and the rotations,
/// rotated at once (on `PostgreSQL`, committed in groups of one statement): none rotates, and
/// nothing is written, in the single rotation's statement and in the group's alike.
async fn rotations_after_a_grants_end_contract(store: &Store, raw: &sqlx::AnyPool) {
    let owner = new_account(store, "ended@example.com").await;
    let mut chains = Vec::new();
    for _ in 0..24 {
        let (_, refresh) = issue(store, &owner, 4000, 9000).await;
        let state = state_of(store, &refresh).await;
        chains.push((refresh, state));
    }
    sqlx::query("UPDATE consents SET expires_at = 4004 WHERE account_id = $1")
        .bind(&owner)
        .execute(raw)
        .await
        .unwrap();
    let rotations = chains.iter().enumerate().map(|(i, (refresh, state))| {
        let new = NewTokens {
            refresh_hash: TokenHash::of(&format!("rt-ended-{i}")),
            access_hash: TokenHash::of(&format!("at-ended-{i}")),
            access_expires_at: 9000,
            scope: "mcp:read".into(),
            jkt: None,
            refresh_jkt: None,
        };
        async move {
            store
                .rotate_refresh(refresh, state, b"sealed", &new, 4005)
                .await
                .unwrap()
        }
    });
    let results = futures::future::join_all(rotations).await;
    assert!(
        results.iter().all(|r| *r != Rotation::Rotated),
        "a rotation after its grant ended: {results:?}"
    );
    let written: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM access_tokens t JOIN token_families f ON f.id = t.family_id \
         WHERE f.account_id = $1 AND t.created_at = 4005",
    )
    .bind(&owner)
    .fetch_one(raw)
    .await
    .unwrap();
    assert_eq!(written, 0, "access tokens minted after the grant ended");
    let successors: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM refresh_tokens r JOIN token_families f ON f.id = r.family_id \
         WHERE f.account_id = $1 AND r.created_at = 4005",
    )
    .bind(&owner)
    .fetch_one(raw)
    .await
    .unwrap();
    assert_eq!(successors, 0, "refresh tokens minted after the grant ended");
}

/// A consent approved again (widened) between the read of a refresh token and its rotation:
/// the grant still covers the token, so the rotation goes ahead with the new scope string
/// instead of failing as if it had lost (which a client would take for an invalid grant).
async fn rotation_after_reapproval_contract(store: &Store) {
    let owner = new_account(store, "again@example.com").await;
    let (code, tokens) = pending_code(store, &owner, "mcp:read", 5000, 9000).await;
    assert!(matches!(
        store.redeem_code(&code, &tokens, 5001).await.unwrap(),
        Redeemed::Issued { .. }
    ));
    let state = state_of(store, &tokens.refresh_hash).await;
    assert_eq!(state.consent_scope, "mcp:read");
    let widened = store
        .approve_consent(&owner, &code.client_id, CALLBACK, "mcp:write", 5002)
        .await
        .unwrap();
    assert_eq!(widened, code.consent_id, "widened in place");
    let next = NewTokens {
        refresh_hash: TokenHash::of("rt-after-reapproval"),
        access_hash: TokenHash::of("at-after-reapproval"),
        access_expires_at: 9000,
        scope: "mcp:read".into(),
        jkt: None,
        refresh_jkt: None,
    };
    assert_eq!(
        store
            .rotate_refresh(&tokens.refresh_hash, &state, b"sealed", &next, 5003)
            .await
            .unwrap(),
        Rotation::Rotated
    );
}

async fn housekeeping_contract(store: &Store, raw: &sqlx::AnyPool) {
    let owner = store
        .create_account(&Email::parse("hk@example.com").unwrap(), "h", 1)
        .await
        .unwrap();
    let day = 24 * 3600;
    let (_live, live_refresh) = issue(store, &owner.id, 1000, 1000 + 3600).await;
    let (revoked, _) = issue(store, &owner.id, 1000, 1000 + 3600).await;
    store.revoke_family(&revoked, "test", 2000).await.unwrap();
    let (codes, access, refresh) = (
        count(raw, "authorization_codes").await,
        count(raw, "access_tokens").await,
        count(raw, "refresh_tokens").await,
    );
    // One day after expiry: expired codes and access tokens go; refresh tokens stay.
    store.housekeeping(1000 + 3600 + day + 1).await.unwrap();
    assert_eq!(count(raw, "authorization_codes").await, codes - 2);
    assert_eq!(count(raw, "access_tokens").await, access - 2);
    assert_eq!(
        count(raw, "refresh_tokens").await,
        refresh,
        "needed for reuse detection"
    );
    // Thirty days after revocation: the revoked family's refresh token goes, the live one stays.
    store.housekeeping(2000 + 30 * day + 1).await.unwrap();
    assert_eq!(count(raw, "refresh_tokens").await, refresh - 1);
    assert!(store.refresh_state(&live_refresh).await.unwrap().is_some());
}

async fn keys_contract(store: &Store) {
    let owner = store
        .create_account(&Email::parse("keys@example.com").unwrap(), "h", 100)
        .await
        .unwrap();
    let other = store
        .create_account(&Email::parse("keys2@example.com").unwrap(), "h", 100)
        .await
        .unwrap();
    let project = store.create_project("K", &owner.id, 100).await.unwrap();
    let new = |project_id, expires_at| NewApiKey {
        account_id: &owner.id,
        project_id,
        name: "n",
        scope: "mcp:read",
        allowed_ips: &[],
        expires_at,
    };
    let (account_key, project_key) = (TokenHash::of("ak"), TokenHash::of("pk"));
    let ak = store
        .create_api_key(&new(None, Some(500)), &account_key, 100)
        .await
        .unwrap();
    let allowed = vec!["10.0.0.0/8".to_string()];
    let pk = store
        .create_api_key(
            &NewApiKey {
                allowed_ips: &allowed,
                ..new(Some(&project), None)
            },
            &project_key,
            100,
        )
        .await
        .unwrap();
    assert!(matches!(
        store
            .create_api_key(&new(None, None), &account_key, 100)
            .await,
        Err(StoreError::Conflict(_))
    ));
    // Expiry is exclusive: live before 500, gone at 500.
    let live = store
        .authenticate_api_key(&account_key, 499)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((live.id.as_str(), live.project_id), (ak.as_str(), None));
    assert!(
        store
            .authenticate_api_key(&account_key, 500)
            .await
            .unwrap()
            .is_none()
    );
    let live = store
        .authenticate_api_key(&project_key, 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(live.project_id.as_deref(), Some(project.as_str()));
    assert_eq!(live.allowed_ips, allowed);
    assert!(
        store
            .authenticate_api_key(&TokenHash::of("x"), 100)
            .await
            .unwrap()
            .is_none()
    );
    // A project key of an account that is not a member is out of range.
    let stray = TokenHash::of("stray");
    store
        .create_api_key(
            &NewApiKey {
                account_id: &other.id,
                ..new(Some(&project), None)
            },
            &stray,
            100,
        )
        .await
        .unwrap();
    assert!(
        store
            .authenticate_api_key(&stray, 100)
            .await
            .unwrap()
            .is_none()
    );
    store
        .add_member(&project, &other.id, Role::Read, 100)
        .await
        .unwrap();
    assert!(
        store
            .authenticate_api_key(&stray, 100)
            .await
            .unwrap()
            .is_some()
    );

    // Twenty concurrent first uses: exactly one wins and is the first use.
    let uses =
        futures::future::join_all((0..20).map(|_| store.record_key_use(&pk, true, 200))).await;
    let firsts = uses
        .iter()
        .filter(|u| matches!(u, Ok(KeyUse::First)))
        .count();
    assert_eq!(firsts, 1, "{uses:?}");
    assert!(uses.iter().all(Result::is_ok));
    assert_eq!(
        store.record_key_use(&pk, false, 259).await.unwrap(),
        KeyUse::Unchanged
    );
    assert_eq!(
        store.record_key_use(&pk, false, 260).await.unwrap(),
        KeyUse::Updated
    );
    let listed = store.api_keys(Some(&owner.id)).await.unwrap();
    assert_eq!(listed.len(), 2);
    let used = listed.iter().find(|k| k.id == pk).unwrap();
    assert_eq!(used.last_used_at, Some(260));
    assert_eq!(used.account_email, "keys@example.com");
    assert_eq!(used.project_id.as_deref(), Some(project.as_str()));
    assert_eq!(store.api_keys(None).await.unwrap().len(), 3);

    assert!(store.revoke_api_key(&pk, 300).await.unwrap());
    assert!(!store.revoke_api_key(&pk, 301).await.unwrap());
    assert!(matches!(
        store.revoke_api_key("missing", 300).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(
        store
            .authenticate_api_key(&project_key, 302)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        store.api_key(&pk).await.unwrap().unwrap().revoked_at,
        Some(300)
    );
}

/// The same answer from `a` and `b` (compared through `Debug`, which shows every field).
fn same<T: std::fmt::Debug>(a: &T, b: &T) {
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

/// On `SQLite` the lookups of every authenticated request run in place (`store::in_place`):
/// each answers exactly what the pool answers, for every column the records hold; a change
/// committed by another connection is seen by the very next lookup, and a change not yet
/// committed neither blocks the lookup nor shows; and none of them had to be asked of the
/// pool instead. On `PostgreSQL` there is nothing in place to compare.
async fn in_place_lookups_contract(store: &Store, raw: &sqlx::AnyPool) {
    let Some(before) = store.in_place_stats() else {
        assert_eq!(
            store.backend(),
            Backend::Postgres,
            "a SQLite file reads in place"
        );
        return;
    };
    let pooled = store.clone().without_in_place_reads();
    assert!(pooled.in_place_stats().is_none());
    let now = 1_000;
    let owner = new_account(store, "in-place@example.com").await;
    store
        .set_account_calls_per_hour(&owner, Some(77))
        .await
        .unwrap();
    let project = store.create_project("In place", &owner, now).await.unwrap();

    // A client with every column filled, and one with the nullable ones empty.
    let full = ClientRecord {
        client_id: "in-place-client".into(),
        client_secret_hash: Some(TokenHash::of("secret")),
        token_endpoint_auth_method: "client_secret_basic".into(),
        client_name: Some("Ünïcödé “app”".into()),
        redirect_uris: vec![CALLBACK.into(), "http://127.0.0.1/cb".into()],
        grant_types: vec!["authorization_code".into(), "refresh_token".into()],
        scope: Some("mcp:read mcp:write".into()),
        metadata: serde_json::json!({"client_name": "x", "nested": {"list": [1, "two", null]}}),
        can_introspect: true,
        created_at: now,
    };
    store.create_client(&full).await.unwrap();
    for id in ["in-place-client", "no-such-client"] {
        let (a, b) = (
            store.client(id).await.unwrap(),
            pooled.client(id).await.unwrap(),
        );
        same(&a, &b);
    }
    let found = store.client("in-place-client").await.unwrap().unwrap();
    assert_eq!(found.metadata, full.metadata);
    assert!(found.can_introspect);

    // An access token and its refresh token, fresh and after the refresh token rotated.
    let (code, tokens) = pending_code(store, &owner, "mcp:read", now, now + 3600).await;
    assert!(matches!(
        store.redeem_code(&code, &tokens, now).await.unwrap(),
        Redeemed::Issued { .. }
    ));
    let access = store
        .authenticate_access_token(&tokens.access_hash, now)
        .await
        .unwrap()
        .expect("a live access token");
    assert_eq!((access.calls_per_hour, access.service), (Some(77), false));
    for at in [now, now + 3600] {
        same(
            &store
                .authenticate_access_token(&tokens.access_hash, at)
                .await
                .unwrap(),
            &pooled
                .authenticate_access_token(&tokens.access_hash, at)
                .await
                .unwrap(),
        );
    }
    same(
        &store.refresh_state(&tokens.refresh_hash).await.unwrap(),
        &pooled.refresh_state(&tokens.refresh_hash).await.unwrap(),
    );
    sqlx::query(
        "UPDATE refresh_tokens SET rotated_at = $1, successor_sealed = $2 WHERE token_hash = $3",
    )
    .bind(now + 1)
    .bind(vec![0u8, 1, 2, 255])
    .bind(tokens.refresh_hash.as_str())
    .execute(raw)
    .await
    .unwrap();
    let rotated = state_of(store, &tokens.refresh_hash).await;
    assert_eq!(
        (rotated.rotated_at, rotated.successor_sealed.as_deref()),
        (Some(now + 1), Some(&[0u8, 1, 2, 255][..]))
    );
    same(
        &Some(rotated),
        &pooled.refresh_state(&tokens.refresh_hash).await.unwrap(),
    );

    // A service client's token limited to one project.
    let service = ClientRecord {
        client_id: "in-place-service".into(),
        grant_types: vec!["client_credentials".into()],
        ..full.clone()
    };
    store
        .create_service_client(
            &service,
            &NewService {
                account_id: &owner,
                project_id: Some(&project),
                scope: "mcp:read",
                resource: "https://mcp.example/mcp",
                issuer: "https://mcp.example",
            },
            now,
        )
        .await
        .unwrap();
    let service = store
        .service_client("in-place-service")
        .await
        .unwrap()
        .unwrap();
    let service_token = TokenHash::of("in-place-service-token");
    store
        .insert_service_token(
            &service,
            &service_token,
            "mcp:read",
            "https://mcp.example/mcp",
            now,
            now + 60,
            None,
            gatehouse::domain::grant::GrantType::ClientCredentials,
        )
        .await
        .unwrap();
    let grant = store
        .authenticate_access_token(&service_token, now)
        .await
        .unwrap()
        .expect("a live service token");
    assert_eq!(
        (grant.service, grant.project_id.as_deref()),
        (true, Some(project.as_str()))
    );
    same(
        &Some(grant),
        &pooled
            .authenticate_access_token(&service_token, now)
            .await
            .unwrap(),
    );

    // Projects and memberships, found and not.
    same(
        &store.projects_of_account(&owner).await.unwrap(),
        &pooled.projects_of_account(&owner).await.unwrap(),
    );
    assert_eq!(store.projects_of_account(&owner).await.unwrap().len(), 1);
    for id in [project.as_str(), "no-such-project"] {
        same(
            &store.membership(&owner, id).await.unwrap(),
            &pooled.membership(&owner, id).await.unwrap(),
        );
    }

    // API keys (account-wide with an expiry, project-bound with addresses) and a personal URL.
    let ips = vec!["10.0.0.0/8".to_string(), "2001:db8::/32".to_string()];
    let (account_key, project_key, url) = (
        TokenHash::of("in-place-ak"),
        TokenHash::of("in-place-pk"),
        TokenHash::of("in-place-url"),
    );
    let key = |project_id, allowed_ips, expires_at| NewApiKey {
        account_id: &owner,
        project_id,
        name: "k",
        scope: "mcp:read mcp:write",
        allowed_ips,
        expires_at,
    };
    store
        .create_api_key(&key(None, &[], Some(now + 60)), &account_key, now)
        .await
        .unwrap();
    store
        .create_api_key(&key(Some(&project), &ips, None), &project_key, now)
        .await
        .unwrap();
    store
        .create_personal_url(
            &NewPersonalUrl {
                account_id: &owner,
                project_id: Some(&project),
                name: "u",
                scope: "mcp:read",
                expires_at: None,
            },
            &url,
            now,
        )
        .await
        .unwrap();
    for hash in [&account_key, &project_key, &TokenHash::of("unknown")] {
        for at in [now, now + 60] {
            same(
                &store.authenticate_api_key(hash, at).await.unwrap(),
                &pooled.authenticate_api_key(hash, at).await.unwrap(),
            );
        }
    }
    let live = store
        .authenticate_api_key(&project_key, now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((live.allowed_ips, live.calls_per_hour), (ips, Some(77)));
    same(
        &store.authenticate_personal_url(&url, now).await.unwrap(),
        &pooled.authenticate_personal_url(&url, now).await.unwrap(),
    );
    assert!(
        store
            .authenticate_personal_url(&url, now)
            .await
            .unwrap()
            .is_some()
    );

    // A revocation another connection has begun but not committed neither blocks a lookup nor
    // shows in it; once committed, the very next lookup refuses the token.
    let mut revoking = raw.begin().await.unwrap();
    sqlx::query("UPDATE access_tokens SET revoked_at = $1 WHERE token_hash = $2")
        .bind(now)
        .bind(tokens.access_hash.as_str())
        .execute(&mut *revoking)
        .await
        .unwrap();
    let asked = std::time::Instant::now();
    assert!(
        store
            .authenticate_access_token(&tokens.access_hash, now)
            .await
            .unwrap()
            .is_some()
    );
    assert!(asked.elapsed() < std::time::Duration::from_secs(1));
    revoking.commit().await.unwrap();
    assert!(
        store
            .authenticate_access_token(&tokens.access_hash, now)
            .await
            .unwrap()
            .is_none()
    );

    let after = store.in_place_stats().unwrap();
    assert_eq!(
        after.fallbacks, before.fallbacks,
        "no lookup failed in place"
    );
    // Each of the 24 lookups above ran in place (the pooled store's ran on the pool), except
    // those that came within a few seconds of another test's server, in this same process,
    // finding its file unwritable (its temporary folder removed while it still ran), which
    // pauses in-place reads for the whole process.
    assert_eq!(
        (after.reads + after.paused) - (before.reads + before.paused),
        24,
        "{before:?} → {after:?}"
    );
}

async fn run_contract(db: &TestDb) {
    let store = open_store(&db.url).await.unwrap();
    // Migrating twice is harmless.
    store.migrate().await.unwrap();
    assert!(store.ping().await);
    // First: a setup link works only while no account exists.
    setup_token_contract(&store).await;
    accounts_contract(&store).await;
    projects_contract(&store).await;
    audit_contract(&store).await;
    jobs_contract(&store).await;
    housekeeping_contract(&store, db.pool().await).await;
    grants_contract(&store, db.pool().await).await;
    issuance_announces_nothing_contract(&store, db).await;
    rotation_racing_withdrawal_contract(&store, db.pool().await).await;
    concurrent_rotations_contract(&store, db.pool().await).await;
    rotations_after_a_grants_end_contract(&store, db.pool().await).await;
    concurrent_lookups_contract(&store).await;
    rotation_after_reapproval_contract(&store).await;
    keys_contract(&store).await;
    in_place_lookups_contract(&store, db.pool().await).await;
    if store.backend() == Backend::Postgres {
        // The concurrent rotations were committed in groups, one statement each, not each
        // alone after a group's statement failed.
        assert!(store.rotation_group_statements() > 0);
    }
    if let Some(stats) = store.in_place_stats() {
        assert_eq!(
            stats.fallbacks, 0,
            "no lookup of the contract failed in place"
        );
        // The rotations' group commits ran on the in-place write connection (unless another
        // test of this process found its file unwritable meanwhile, which pauses in-place
        // work for the whole process; see `in_place_lookups_contract`).
        if stats.paused == 0 {
            assert!(stats.writes > 0, "{stats:?}");
        }
    }
    store.close().await;
}

#[tokio::test]
async fn contract_on_sqlite() {
    run_contract(&TestDb::sqlite()).await;
}

#[tokio::test]
async fn contract_on_postgres() {
    match TestDb::postgres().await {
        Some(db) => run_contract(&db).await,
        None => eprintln!("GATEHOUSE_TEST_POSTGRES is not set: PostgreSQL contract not run here"),
    }
}

#[test]
fn both_migration_folders_hold_the_same_file_names() {
    let names = |dir: &str| {
        let mut v: Vec<String> =
            std::fs::read_dir(format!("{}/migrations/{dir}", env!("CARGO_MANIFEST_DIR")))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
        v.sort();
        v
    };
    let sqlite = names("sqlite");
    assert!(!sqlite.is_empty());
    assert_eq!(sqlite, names("postgres"));
}
