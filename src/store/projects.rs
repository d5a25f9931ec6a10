//! Projects and memberships.

use super::hot::{HotLookup, Lookup, Param};
use super::in_place::{self, FromSqliteRow};
use super::{Flag, Store, StoreError, new_id};
use crate::domain::account::Role;
use crate::domain::principal::Principal;

/// A project as seen by one member.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ProjectMembership {
    /// Project id (UUID text).
    #[sqlx(rename = "id")]
    pub project_id: String,
    /// Project name.
    pub name: String,
    /// The member's role.
    #[sqlx(try_from = "String")]
    pub role: Role,
    /// Unix seconds.
    pub created_at: i64,
}

/// The active projects of account `$1` with its role in each, oldest first: rows of
/// [`ProjectMembership`]. Batched on `PostgreSQL`.
pub(super) const PROJECTS_OF_ACCOUNT: Lookup<ProjectMembership, Vec<ProjectMembership>> =
    Lookup::new(
        HotLookup::ProjectsOfAccount,
        "SELECT p.id AS id, p.name AS name, m.role AS role, p.created_at AS created_at \
     FROM memberships m JOIN projects p ON p.id = m.project_id \
     WHERE m.account_id = $1 AND p.status = 'active' ORDER BY created_at, id",
    )
    .batched(|store| &store.project_reads);

/// Account `$1`'s membership in the active project `$2`: a [`ProjectMembership`].
const MEMBERSHIP: Lookup<ProjectMembership, Option<ProjectMembership>> = Lookup::new(
    HotLookup::Membership,
    "SELECT p.id AS id, p.name AS name, m.role AS role, p.created_at AS created_at \
     FROM memberships m JOIN projects p ON p.id = m.project_id \
     WHERE m.account_id = $1 AND m.project_id = $2 AND p.status = 'active'",
);

impl FromSqliteRow for ProjectMembership {
    const COLUMNS: &'static [&'static str] = &["id", "name", "role", "created_at"];

    fn from_sqlite(row: &in_place::Named<'_, '_>) -> rusqlite::Result<Self> {
        let role = row.index("role")?;
        Ok(ProjectMembership {
            project_id: row.get("id")?,
            name: row.get("name")?,
            role: Role::try_from(row.get_at::<String>(role)?)
                .map_err(|e| in_place::conversion(role, e))?,
            created_at: row.get("created_at")?,
        })
    }
}

/// A project on the console's home page.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ProjectSummary {
    /// Project id (UUID text).
    #[sqlx(rename = "id")]
    pub project_id: String,
    /// Project name.
    pub name: String,
    /// The viewing account's role.
    #[sqlx(try_from = "String")]
    pub role: Role,
    /// How many notes it holds.
    pub note_count: i64,
}

/// A member of a project, for its console page.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Member {
    /// Account id.
    pub account_id: String,
    /// The account's email.
    pub email: String,
    /// Its role.
    #[sqlx(try_from = "String")]
    pub role: Role,
    /// Whether it owns the project (the owner cannot be removed).
    #[sqlx(try_from = "Flag")]
    pub is_owner: bool,
}

impl Store {
    /// Creates an active project owned by `owner_account_id`, who becomes a `write` member.
    /// Returns the new project id.
    pub async fn create_project(
        &self,
        name: &str,
        owner_account_id: &str,
        now: i64,
    ) -> Result<String, StoreError> {
        let id = new_id();
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO projects (id, name, owner_account_id, status, created_at) VALUES ($1, $2, $3, 'active', $4)",
        )
        .bind(&id)
        .bind(name)
        .bind(owner_account_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO memberships (project_id, account_id, role, created_at) VALUES ($1, $2, 'write', $3)",
        )
        .bind(&id)
        .bind(owner_account_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Adds (or changes the role of) a member. Errors: [`StoreError::NotFound`] for an unknown
    /// project.
    pub async fn add_member(
        &self,
        project_id: &str,
        account_id: &str,
        role: Role,
        now: i64,
    ) -> Result<(), StoreError> {
        let exists = sqlx::query("SELECT 1 AS ok FROM projects WHERE id = $1")
            .bind(project_id)
            .fetch_optional(&self.pool())
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound(format!("project {project_id}")));
        }
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO memberships (project_id, account_id, role, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (project_id, account_id) DO UPDATE SET role = excluded.role",
        )
        .bind(project_id)
        .bind(account_id)
        .bind(role.as_str())
        .bind(now)
        .execute(&mut *tx)
        .await?;
        super::invitations::void_pending(&mut tx, project_id, account_id).await?;
        tx.commit().await?;
        self.auth_changed().await;
        Ok(())
    }

    /// The account's active projects with its role in each, oldest first.
    pub async fn projects_of_account(
        &self,
        account_id: &str,
    ) -> Result<Vec<ProjectMembership>, StoreError> {
        self.hot(&PROJECTS_OF_ACCOUNT, &[Param::Text(account_id)])
            .await
    }

    /// The account's membership in one active project; `None` both for a project that does not
    /// exist and for one the account is not a member of (callers must not tell them apart).
    pub async fn membership(
        &self,
        account_id: &str,
        project_id: &str,
    ) -> Result<Option<ProjectMembership>, StoreError> {
        self.hot(
            &MEMBERSHIP,
            &[Param::Text(account_id), Param::Text(project_id)],
        )
        .await
    }

    /// The active projects `principal` reaches, with its account's role in each, oldest first:
    /// all of the account's for an OAuth grant or an account key, at most the one project of a
    /// project key (none once the account is no longer a member or the project is archived),
    /// only the chosen ones for a grant limited to named projects ([`Reach::Projects`]).
    pub async fn reachable_projects(
        &self,
        principal: &Principal,
    ) -> Result<Vec<ProjectMembership>, StoreError> {
        let mut projects = self.projects_of_account(&principal.account_id).await?;
        projects.retain(|m| principal.reaches(&m.project_id));
        Ok(projects)
    }

    /// The account's membership in `project_id` if `principal` reaches it; `None` for a
    /// project out of reach exactly as for a missing one (callers must not tell them apart).
    pub async fn reachable_membership(
        &self,
        principal: &Principal,
        project_id: &str,
    ) -> Result<Option<ProjectMembership>, StoreError> {
        if !principal.reaches(project_id) {
            return Ok(None);
        }
        self.membership(&principal.account_id, project_id).await
    }

    /// The account's active projects with its role and the number of notes in each, oldest
    /// first (the console's home page).
    pub async fn project_summaries(
        &self,
        account_id: &str,
    ) -> Result<Vec<ProjectSummary>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT p.id AS id, p.name AS name, m.role AS role, \
             (SELECT COUNT(*) FROM notes n WHERE n.project_id = p.id) AS note_count \
             FROM memberships m JOIN projects p ON p.id = m.project_id \
             WHERE m.account_id = $1 AND p.status = 'active' ORDER BY p.created_at, p.id",
        )
        .bind(account_id)
        .fetch_all(&self.pool())
        .await?)
    }

    /// The members of a project with their emails and roles, the owner first, then by email.
    /// Callers check the viewer's own membership first.
    pub async fn members_of_project(&self, project_id: &str) -> Result<Vec<Member>, StoreError> {
        let mut members: Vec<Member> = sqlx::query_as(
            "SELECT a.id AS account_id, a.email AS email, m.role AS role, \
             a.id = p.owner_account_id AS is_owner \
             FROM memberships m JOIN accounts a ON a.id = m.account_id \
             JOIN projects p ON p.id = m.project_id \
             WHERE m.project_id = $1 ORDER BY a.email",
        )
        .bind(project_id)
        .fetch_all(&self.pool())
        .await?;
        members.sort_by_key(|m| !m.is_owner);
        Ok(members)
    }

    /// The account that owns a project, if the project exists.
    pub async fn project_owner(&self, project_id: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT owner_account_id FROM projects WHERE id = $1")
                .bind(project_id)
                .fetch_optional(&self.pool())
                .await?,
        )
    }

    /// Whether accounts `a` and `b` are both members (owners included) of one project.
    ///
    /// Errors: [`StoreError::Database`].
    pub async fn share_a_project(&self, a: &str, b: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "SELECT 1 AS ok FROM memberships x JOIN memberships y ON y.project_id = x.project_id \
             WHERE x.account_id = $1 AND y.account_id = $2 LIMIT 1",
        )
        .bind(a)
        .bind(b)
        .fetch_optional(&self.pool())
        .await?
        .is_some())
    }

    /// Removes a member; the owner is never removed. Returns whether a membership was removed.
    ///
    /// Removal ends, for good and in the same transaction, every credential the member held
    /// for this project alone, as archiving the project or revoking an app does: their project
    /// keys and personal URLs are revoked, and their service clients limited to the project
    /// have their grant (consent, token families, access tokens) revoked. Adding the member
    /// back revives none of them.
    pub async fn remove_member(
        &self,
        project_id: &str,
        account_id: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "DELETE FROM memberships WHERE project_id = $1 AND account_id = $2 \
             AND account_id <> (SELECT owner_account_id FROM projects WHERE id = $1)",
        )
        .bind(project_id)
        .bind(account_id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        for sql in [
            "UPDATE api_keys SET revoked_at = $3 WHERE project_id = $1 AND account_id = $2 \
             AND revoked_at IS NULL",
            "UPDATE personal_urls SET revoked_at = $3 WHERE project_id = $1 AND account_id = $2 \
             AND revoked_at IS NULL",
            "UPDATE access_tokens SET revoked_at = $3 WHERE revoked_at IS NULL AND family_id IN \
             (SELECT family_id FROM service_clients WHERE project_id = $1 AND account_id = $2)",
            "UPDATE token_families SET revoked_at = $3, revoked_reason = 'member removed' \
             WHERE revoked_at IS NULL AND id IN \
             (SELECT family_id FROM service_clients WHERE project_id = $1 AND account_id = $2)",
            "UPDATE consents SET revoked_at = $3 WHERE revoked_at IS NULL AND id IN \
             (SELECT consent_id FROM service_clients WHERE project_id = $1 AND account_id = $2)",
        ] {
            sqlx::query(sql)
                .bind(project_id)
                .bind(account_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        // An invitation still pending would bring them back: it ends with the membership.
        super::invitations::void_pending(&mut tx, project_id, account_id).await?;
        tx.commit().await?;
        self.auth_changed().await;
        Ok(true)
    }
}

/// A project as `gatehouse project list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ProjectListing {
    /// Project id (UUID text).
    #[sqlx(rename = "id")]
    pub project_id: String,
    /// Project name.
    pub name: String,
    /// The owner's email.
    pub owner_email: String,
    /// `active` or `archived`.
    pub status: String,
    /// How many members it has, the owner included.
    pub members: i64,
    /// Unix seconds.
    pub created_at: i64,
}

impl Store {
    /// Every project, oldest first; with `member`, only the projects that account belongs to.
    pub async fn project_listing(
        &self,
        member: Option<&str>,
    ) -> Result<Vec<ProjectListing>, StoreError> {
        const ALL: &str = "SELECT p.id AS id, p.name AS name, a.email AS owner_email, p.status AS status, \
             (SELECT COUNT(*) FROM memberships m WHERE m.project_id = p.id) AS members, \
             p.created_at AS created_at \
             FROM projects p JOIN accounts a ON a.id = p.owner_account_id";
        const ORDER: &str = " ORDER BY p.created_at, p.id";
        Ok(match member {
            None => {
                sqlx::query_as(&format!("{ALL}{ORDER}"))
                    .fetch_all(&self.pool())
                    .await?
            }
            Some(account_id) => {
                sqlx::query_as(&format!(
                    "{ALL} WHERE EXISTS (SELECT 1 FROM memberships m \
                     WHERE m.project_id = p.id AND m.account_id = $1){ORDER}"
                ))
                .bind(account_id)
                .fetch_all(&self.pool())
                .await?
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_lookups_answer_the_declared_columns() {
        in_place::tests::assert_columns::<ProjectMembership>(PROJECTS_OF_ACCOUNT.sql);
        in_place::tests::assert_columns::<ProjectMembership>(MEMBERSHIP.sql);
    }
}
