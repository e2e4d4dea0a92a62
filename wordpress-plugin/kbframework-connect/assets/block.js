/* kbframework chat block (editor side): no build step, plain wp.element. The page shows the
   full-page chat in an iframe, rendered by the server (kbfc_render_chat). */
(function (wp) {
  var el = wp.element.createElement, __ = wp.i18n.__;
  wp.blocks.registerBlockType('kbframework/chat', {
    apiVersion: 2,
    title: __('kbframework chat', 'kbframework-connect'),
    icon: 'format-chat',
    category: 'widgets',
    attributes: { height: { type: 'string', default: '600px' } },
    edit: function (props) {
      return el('div', { className: 'kbfc-block-placeholder', style: { border: '1px dashed #999', padding: '2em', textAlign: 'center' } },
        el('strong', null, __('kbframework chat', 'kbframework-connect')),
        el('p', null, __('The full-page chat appears here on the published page.', 'kbframework-connect')),
        el('label', null, __('Height', 'kbframework-connect') + ' ',
          el('input', { type: 'text', value: props.attributes.height, onChange: function (e) { props.setAttributes({ height: e.target.value }); } })));
    },
    save: function () { return null; }
  });
})(window.wp);
