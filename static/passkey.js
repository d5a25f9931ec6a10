// Gatehouse's one script: the passkey buttons of the sign-in and account pages (WebAuthn).
// It asks the server for a ceremony's options, hands them to navigator.credentials, and
// posts the authenticator's answer back as JSON with the page's CSRF token. Without it (or
// without WebAuthn in the browser) the buttons stay hidden and every other form works.
(() => {
  'use strict';
  if (!window.PublicKeyCredential || !navigator.credentials) return;

  const toBytes = (b64url) => {
    const b64 = b64url.replace(/-/g, '+').replace(/_/g, '/');
    const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
    return Uint8Array.from(bin, (c) => c.charCodeAt(0)).buffer;
  };
  const toText = (buf) => {
    let bin = '';
    for (const b of new Uint8Array(buf)) bin += String.fromCharCode(b);
    return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  };

  async function post(url, csrf, body) {
    const res = await fetch(url, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
      body: JSON.stringify(body),
    });
    let data = {};
    try {
      data = await res.json();
    } catch {
      // not JSON: the status says enough
    }
    if (!res.ok) throw new Error(data.error || `The server answered ${res.status}. Reload the page and try again.`);
    return data;
  }

  const cancelled = (e) => e && (e.name === 'NotAllowedError' || e.name === 'AbortError');

  function wire(box, run) {
    const button = box.querySelector('button');
    const error = box.querySelector('.error');
    box.hidden = false;
    button.addEventListener('click', async () => {
      error.hidden = true;
      button.disabled = true;
      try {
        const done = await run(box.dataset.csrf);
        window.location.assign(done.redirect || '/');
      } catch (e) {
        error.textContent = cancelled(e)
          ? 'The passkey request was cancelled or timed out. Try again.'
          : e.message || String(e);
        error.hidden = false;
        button.disabled = false;
      }
    });
  }

  const signIn = document.getElementById('passkey-signin');
  if (signIn) {
    wire(signIn, async (csrf) => {
      const { ceremony, publicKey } = await post('/signin/passkey/options', csrf, {});
      publicKey.challenge = toBytes(publicKey.challenge);
      for (const c of publicKey.allowCredentials || []) c.id = toBytes(c.id);
      const cred = await navigator.credentials.get({ publicKey });
      const r = cred.response;
      const credential = {
        id: cred.id,
        rawId: toText(cred.rawId),
        type: cred.type,
        response: {
          authenticatorData: toText(r.authenticatorData),
          clientDataJSON: toText(r.clientDataJSON),
          signature: toText(r.signature),
          userHandle: r.userHandle ? toText(r.userHandle) : null,
        },
        extensions: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
      };
      return post('/signin/passkey', csrf, { ceremony, credential, next: signIn.dataset.next || '/' });
    });
  }

  const add = document.getElementById('passkey-add');
  if (add) {
    wire(add, async (csrf) => {
      const name = document.getElementById('passkey-name').value;
      const { ceremony, publicKey } = await post('/account/passkeys/options', csrf, { name });
      publicKey.challenge = toBytes(publicKey.challenge);
      publicKey.user.id = toBytes(publicKey.user.id);
      for (const c of publicKey.excludeCredentials || []) c.id = toBytes(c.id);
      const cred = await navigator.credentials.create({ publicKey });
      const r = cred.response;
      const credential = {
        id: cred.id,
        rawId: toText(cred.rawId),
        type: cred.type,
        response: {
          attestationObject: toText(r.attestationObject),
          clientDataJSON: toText(r.clientDataJSON),
          transports: r.getTransports ? r.getTransports() : undefined,
        },
        extensions: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
      };
      return post('/account/passkeys', csrf, { ceremony, credential });
    });
  }
})();
